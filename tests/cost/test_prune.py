"""The bounded search (hpdsl/cost/sweep/prune.py): bounds at most every candidate's price, answers equal to the exhaustive search."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cost_builders import dense_model, example, moe_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpdsl.bound.bind import CostModel
from hpdsl.cost.feasibility.problems import InvalidStrategyError
from hpdsl.cost.feasibility.rules import invalid_mask
from hpdsl.cost.price.grid import price_fit
from hpdsl.cost.price.prepare import prepare
from hpdsl.cost.search import SearchResult, search
from hpdsl.cost.sweep.prune import _expand, bound_rows, bounds, row_count, stable_order
from hpdsl.cost.sweep.rank import canonical_zero
from hpdsl.cost.sweep.space import search_space

GIB = 1024**3
EXAMPLES = ("llama2_7b", "llama3_8b", "mixtral_8x7b", "qwen3_30b_a3b", "qwen3_next_80b_a3b", "deepseek_v3",
            "t5_small")
_MODELS: dict[str, CostModel] = {}


def _model(name: str) -> CostModel:
    if name not in _MODELS:
        _MODELS[name] = example(name)
    return _MODELS[name]


def _same_answer(pruned: SearchResult, full: SearchResult) -> None:
    assert [e.strategy for e in pruned.top] == [e.strategy for e in full.top]
    assert [e.step_time_s for e in pruned.top] == [e.step_time_s for e in full.top]
    assert [e.memory.peak_bytes for e in pruned.top] == [e.memory.peak_bytes for e in full.top]
    assert pruned.stands_for == full.stands_for
    assert pruned.enumerated == full.enumerated and pruned.skipped + pruned.valid >= pruned.fitting
    assert full.skipped == 0 and pruned.valid <= full.valid and pruned.fitting <= full.fitting


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(EXAMPLES), st.sampled_from((4, 8, 16, 32, 64, 96)),
       st.sampled_from(((1,), (1, 2), (1, 2, 4, 8), (2, 4))), st.sampled_from(((1,), (1, 2))),
       st.sampled_from((64, 256, 1024)), st.sampled_from((512, 2048, 4096)), st.booleans())
def test_bounds_are_at_most_every_candidates_price(name: str, devices: int, micro_batches: tuple[int, ...],
                                                    vpp: tuple[int, ...], global_batch: int, seq_len: int,
                                                    split: bool) -> None:
    prepared = prepare(_model(name))
    space = search_space(prepared, devices, global_batch=global_batch, seq_len=seq_len,
                         micro_batches=micro_batches, vpp=vpp)
    rows = bound_rows(space, split)
    assert len(rows[0]) == row_count(space, split)
    t_lb, m_lb = bounds(prepared, space, rows, split)
    _, grid = _expand(space, rows, np.arange(len(rows[0])), split)
    row = np.arange(len(grid)) // (space.sizes[4] * (1 if split else space.sizes[3]))
    ok = ~invalid_mask(prepared.columns, grid, requires=False)
    if not np.any(ok):
        return
    times, peaks = price_fit(prepared, canonical_zero(grid.take(ok)))
    assert np.all(t_lb[row[ok]] <= times) and np.all(m_lb[row[ok]] <= peaks)
    assert np.all(t_lb[row[ok]] > 0) and np.all(m_lb[row[ok]] > 0)   # bounds, not zeros


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(EXAMPLES), st.sampled_from((8, 16, 24, 64, 128, 256)),
       st.sampled_from((24, 40, 80, 141)), st.sampled_from((1, 3, 10, 40)), st.booleans(),
       st.sampled_from(((1, 2, 4, 8), (1, 2), (1,))))
def test_bounded_search_equals_the_exhaustive_one(name: str, devices: int, gib: int, top: int, pareto: bool,
                                                 vpp: tuple[int, ...]) -> None:
    model = _model(name)
    pruned, full = (search(model, devices, gib * GIB, top=top, pareto=pareto, vpp=vpp, global_batch=256,
                           seq_len=4096, progress=False, _exhaustive=exhaustive) for exhaustive in (False, True))
    _same_answer(pruned, full)


def test_bounded_search_equals_the_exhaustive_one_on_deepseek_v3_1024_devices() -> None:
    model = _model("deepseek_v3")
    for pareto in (False, True):
        pruned = search(model, 1024, pareto=pareto, progress=False)
        full = search(model, 1024, pareto=pareto, progress=False, _exhaustive=True)
        _same_answer(pruned, full)
        assert len(pruned.top) == 10 and (pareto or pruned.skipped > pruned.enumerated // 2)


def test_small_models_and_the_ties_they_make() -> None:
    # Tiny models tie often (cp/dp swaps priced the same): stands_for must count every tied candidate.
    for model in (dense_model(layers=4), moe_model()):
        for devices, gib in ((8, 1), (16, 4), (32, 64)):
            for pareto in (False, True):
                pruned, full = (search(model, devices, gib * GIB, top=5, pareto=pareto, global_batch=64,
                                       seq_len=256, progress=False, _exhaustive=exhaustive)
                                for exhaustive in (False, True))
                _same_answer(pruned, full)


def test_131072_devices_answers() -> None:
    # The whole product is 4 million candidates, past MAX_CANDIDATES: only the bounded search answers.
    result = search(_model("deepseek_v3"), 131072, progress=False)
    assert len(result.top) == 10 and result.skipped > 3_000_000 and result.enumerated > 4_000_000
    assert all(e.memory.fits and e.strategy.devices == 131072 for e in result.top)
    times = [e.step_time_s for e in result.top]
    assert times == sorted(times)


def test_a_search_past_what_can_be_bounded_is_refused_before_it_starts() -> None:
    with pytest.raises(InvalidStrategyError, match="would bound .* groups of candidates, more than 2,000,000"):
        search(_model("deepseek_v3"), 131072, micro_batches=tuple(range(1, 17)), vpp=tuple(range(1, 17)),
               progress=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from((0.0, -0.0, 1.0, 2.5, 3.0, 1e-300, math.inf, -math.inf, math.nan)), max_size=60)
       | st.lists(st.floats(allow_nan=True), max_size=200))
def test_stable_order_is_the_stable_argsort(values: list[float]) -> None:
    array = np.asarray(values, dtype=np.float64)
    assert np.array_equal(stable_order(array), np.argsort(array, kind="stable"))
