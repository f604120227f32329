"""--impl: one strategy priced alone (compiled plans) equals the grid's pricing, for every implementation."""

from __future__ import annotations

from cost_builders import EXAMPLES, example

from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.price.grid import price_grid
from hpdsl.cost.price.prepare import prepare
from hpdsl.model.strategy import IMPLS, Strategy


def test_each_impl_is_priced_by_its_own_plan_and_agrees_with_the_grid() -> None:
    prepared = prepare(example("mixtral_8x7b"))
    peaks = []
    for _ in range(2):  # the second round runs the compiled plans
        for impl in IMPLS:
            s = Strategy(tp=2, pp=2, dp=2, ep=2, impl=impl, sequence_parallel=True)
            alone = estimate(prepared, s)
            grid = price_grid(prepared, StrategyGrid.from_strategies([s]))
            assert alone.memory.peak_bytes == float(grid.peak_bytes[0])
            assert alone.step_time_s == float(grid.step_time_s[0])
            peaks.append(alone.memory.peak_bytes)
    n = len(IMPLS)
    fused, sdpa, eager, sdpa_cpu = peaks[:n]
    assert fused < sdpa < eager and peaks[n:] == peaks[:n]
    assert sdpa_cpu == sdpa  # equal head sizes and no score bias: CPU SDPA runs its flash kernel too


def test_a_replicated_mixers_hf_terms_are_whole_on_every_tp_rank() -> None:
    import attrs

    from hpdsl.cost.facts.columns import model_columns
    from hpdsl.cost.formulas.context import scalar_context
    from hpdsl.cost.facts.roles import MIXER_ROLES
    from hpdsl.cost.formulas.memory import column_act_coeffs, hf_extra

    from hpdsl.api import compile_paths
    from hpdsl.cost import bind

    registry = compile_paths([EXAMPLES / "qwen3_next_80b_a3b.hpf"])
    model = registry.models["qwen3_next_80b_a3b"]
    cost = bind(model, registry.profiles[model.profile], families=registry.families)
    columns = model_columns(cost)
    column = next(c for c in columns.columns if c.role == "layer" and c.whole & MIXER_ROLES)
    hf = column_act_coeffs(column, columns).hf
    assert hf is not None and hf.whole and hf.mix_c > 0  # FLA's A and gate: gated_delta_net is replicated
    x = scalar_context(Strategy(tp=2, impl="hf-sdpa", sequence_parallel=True), cost.profile.run)
    split = hf_extra(attrs.evolve(hf, whole=False), x)
    # Whole, the mixer's terms are not halved: the difference is the half tp=2 took off.
    assert hf_extra(hf, x) - split == (x.compute_bytes * hf.mix_c + hf.mix_b) / 2
