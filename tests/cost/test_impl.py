"""--impl: one strategy priced alone (compiled plans) equals the grid's pricing, for every implementation."""

from __future__ import annotations

from cost_builders import example

from hpdsl.cost.estimate import estimate
from hpdsl.cost.pricing import prepare, price_grid
from hpdsl.cost.strategy import IMPLS, Strategy, StrategyGrid


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
