"""The estimator honours the module families' requires: it never prices a layout the backend refuses."""

from __future__ import annotations

from cost_builders import EXAMPLES

from hpdsl.api import bind_model
from hpdsl.cost.search import search
from hpdsl.cost.strategy import Strategy, validate_strategy

GIB = 1024**3


def test_search_never_proposes_context_parallelism_for_gated_deltanet() -> None:
    cost_model = bind_model([EXAMPLES / "qwen3_next_80b_a3b.hpf"])
    result = search(cost_model, 64, 80 * GIB, top=20)
    assert result.top and all(e.strategy.cp == 1 for e in result.top)


def test_a_refused_layout_names_the_family_and_its_message() -> None:
    cost_model = bind_model([EXAMPLES / "deepseek_v3.hpf"])
    reasons = validate_strategy(Strategy(cp=2, dp=8, ep=8, global_batch=16), cost_model)
    assert "mla: family 'mla': MLA has no context-parallel form; use cp = 1" in reasons


def test_without_families_the_layout_is_only_checked_against_the_model() -> None:
    from hpdsl.cost import bind

    families = bind_model([EXAMPLES / "deepseek_v3.hpf"])
    bare = bind(families.model, families.profile)
    strategy = Strategy(cp=2, dp=8, ep=8, global_batch=16)
    assert not any("family" in reason for reason in validate_strategy(strategy, bare))
