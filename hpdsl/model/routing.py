"""The cross-field rules of a MoE's routing: counts that are sound alone but leave a token no experts to choose.

One function serves both places a model's fields meet: the checker's located diagnostics
(hpdsl/check/model_rules.py) and `--set`'s usage errors (hpdsl/ir/overrides.py).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class RoutingProblem:
    """A contradiction among a moe block's routing fields: the field to blame, what is wrong, how to fix it."""

    field: str
    code: str
    message: str
    hint: str


def routing_problem(experts: int, top_k: int, groups: int = 1, group_top: int = 1) -> RoutingProblem | None:
    """Return the first contradiction among a moe block's experts, top_k and routing groups (None: sound)."""
    if top_k > experts:
        return RoutingProblem("top_k", "top-k-exceeds-experts",
                              f"top_k {top_k} chooses more experts than the {experts} there are",
                              "top_k is the experts chosen per token, at most `experts`")
    if experts % groups:
        return RoutingProblem("router_groups", "router-groups-mismatch",
                              f"router_groups {groups} does not divide the {experts} experts",
                              "group-limited routing splits the experts into equal groups: state a divisor of "
                              "`experts` (1: no groups)")
    if group_top > groups:
        return RoutingProblem("router_group_top", "router-groups-mismatch",
                              f"router_group_top {group_top} chooses more groups than the {groups} there are",
                              "router_group_top is the groups a token's experts come from, at most `router_groups`")
    if top_k > group_top * (experts // groups):
        return RoutingProblem("top_k", "router-groups-mismatch",
                              f"top_k {top_k} chooses more experts than the {group_top} of {groups} groups a token "
                              f"keeps hold ({group_top} × {experts // groups})",
                              "raise router_group_top, or lower top_k")
    return None
