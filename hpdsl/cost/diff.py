"""Two registries into what changed per model: layer groups, parameters, FLOPs, peak memory.

`hpdsl diff` (hpdsl/cli/diff.py) prints this. Parameters are the exact counts of
`parameters` (hpdsl/cost/facts/params.py); FLOPs per token are the estimator's forward
FLOPs of one step divided by its tokens; peak memory per pipeline stage is only
priced when a strategy is given, since it depends on one.
"""

from __future__ import annotations

from typing import Any

import attrs

from hpdsl.bound.bind import bind
from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.params import parameters
from hpdsl.model.strategy import Strategy
from hpdsl.registry import Registry


@attrs.frozen
class ModelSummary:
    """What `hpdsl diff` compares of one model."""

    profile: str
    layers: int
    groups: tuple[tuple[str | None, int, bool], ...]
    total: int
    active: int
    flops_per_token: float
    stage_peaks: tuple[float, ...] | None

    def to_json(self) -> dict[str, Any]:
        """Return the summary as `hpdsl diff --json` shows one side."""
        return {"profile": self.profile, "layers": self.layers,
                "groups": [{"kind": k, "count": c, "mtp": m} for k, c, m in self.groups],
                "params": {"total": self.total, "active": self.active},
                "flops_per_token": self.flops_per_token,
                "peak_memory_per_stage": None if self.stage_peaks is None else list(self.stage_peaks)}


def summarize(registry: Registry, name: str, strategy: Strategy | None) -> ModelSummary:
    """Return the groups, exact parameters, FLOPs per token and (with a strategy) stage peaks."""
    model = registry.model(name)
    cost_model = bind(model, registry.profile(model.profile), families=registry.families)
    params = parameters(cost_model)
    priced = estimate(cost_model, strategy or Strategy())
    tokens = priced.strategy.batch * priced.strategy.seq_len
    peaks = (None if strategy is None
             else tuple(stage.total_bytes for stage in priced.memory.per_stage))
    return ModelSummary(
        profile=model.profile, layers=model.layers,
        groups=tuple((g.kind, g.count, g.mtp) for g in model.groups),
        total=int(params.total), active=int(params.active),
        flops_per_token=priced.flops.forward / tokens, stage_peaks=peaks)


def diff_registries(a: Registry, b: Registry, strategy: Strategy | None) -> dict[str, Any]:
    """Return the JSON object of `hpdsl diff`: added and removed models, and each common one's sides."""
    common = [name for name in a.models if name in b.models]
    models: dict[str, Any] = {}
    for name in common:
        left, right = summarize(a, name, strategy), summarize(b, name, strategy)
        models[name] = {"changed": left != right, "a": left.to_json(), "b": right.to_json(),
                        "delta": {"total": right.total - left.total,
                                  "active": right.active - left.active,
                                  "flops_per_token": right.flops_per_token - left.flops_per_token}}
    return {"added": sorted(set(b.models) - set(a.models)),
            "removed": sorted(set(a.models) - set(b.models)),
            "models": models,
            "strategy": None if strategy is None else attrs.asdict(strategy)}
