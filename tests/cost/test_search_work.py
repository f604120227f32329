"""The search's shared work (hpdsl/cost/price/grid.py work_table, Space.work_codes), the curve's array path and a fixed choice's widths price bitwise as before."""

from __future__ import annotations


import numpy as np
import pytest
from cost_builders import example, valid_with_codes
from hypothesis import given, settings
from hypothesis import strategies as st

from hpdsl.cost.facts.devices import device_facts
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.formulas.context import context, precision_widths
from hpdsl.cost.formulas.kernels import curve_efficiency
from hpdsl.cost.price.grid import WORK_FIELDS, WorkMemo, price_fit, representatives
from hpdsl.cost.price.prepare import prepare
from hpdsl.cost.sweep.space import full_grid, search_space
from hpdsl.model.strategy import Strategy


@pytest.mark.parametrize(("name", "devices", "device"), [("llama3_8b", 64, "h100"), ("mixtral_8x7b", 32, "mi300x"),
                                                         ("qwen3_30b_a3b", 16, "h100@dgx_h100")])
def test_work_shared_by_code_prices_every_candidate_as_alone(name: str, devices: int, device: str) -> None:
    prepared = prepare(example(name))
    space = search_space(prepared, devices, global_batch=256, seq_len=4096, vpp=(1, 2),
                         base=Strategy().with_(device=device))
    valid, codes = valid_with_codes(space, prepared.columns)
    assert len(np.unique(codes)) < len(valid)   # some work is shared, or the test checks nothing
    alone, shared = price_fit(prepared, valid), price_fit(prepared, valid, codes)
    assert np.array_equal(alone[0], shared[0], equal_nan=True)
    assert np.array_equal(alone[1], shared[1], equal_nan=True)


def test_representatives_leave_the_layout_fields_unset() -> None:
    prepared = prepare(example("llama3_8b"))
    space = search_space(prepared, 16, global_batch=256, seq_len=4096)
    x = context(full_grid(space), prepared.columns.cost_model.profile.run)
    xu = representatives(x, np.arange(3))
    for name in ("dp", "pp", "vpp", "zero", "micro_batches", "bw_dp", "bw_pp", "expert_dp", "grads_held"):
        assert name not in WORK_FIELDS and getattr(xu, name) is None
    assert np.array_equal(xu.tp, x.tp[:3]) and np.array_equal(xu.bw_tp, x.bw_tp[:3])


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(("h100", "a100", "mi300x", "b200", "cpu")),
       st.lists(st.one_of(st.floats(0, 20000), st.floats(-1, 1e7), st.sampled_from((0.0, 128.0, 256.0, 8192.0))),
                min_size=1, max_size=40))
def test_curve_array_path_equals_the_float_path(device: str, sizes: list[float]) -> None:
    curve = device_facts(device)[1]
    shares = curve_efficiency(curve, np.asarray(sizes))
    assert [float(s) for s in shares] == [curve_efficiency(curve, size) for size in sizes]


@pytest.mark.parametrize(("precision", "optimizer", "param_bytes", "compute_bytes"),
                         [(0, 0, 0, 0), (1, 1, 0, 0), (2, 0, 3, 0), (-1, -1, 0, 4), (0, 1, 2, 2)])
def test_widths_of_fixed_choices_equal_the_per_candidate_lookup(precision: int, optimizer: int, param_bytes: int,
                                                                 compute_bytes: int) -> None:
    # A search's grid broadcasts its fixed choices (one value, stride 0): precision_widths finds them once.
    run = example("llama2_7b").profile.run
    grid = StrategyGrid.from_arrays(5, precision=precision, optimizer=optimizer, param_bytes=param_bytes,
                                    compute_bytes=compute_bytes)
    fixed = StrategyGrid({k: np.broadcast_to(v[:1], (5,)) for k, v in grid.arrays.items()}, grid.splits,
                         grid.devices)
    once, each = precision_widths(fixed, run), precision_widths(grid, run)
    assert {k: v.tobytes() for k, v in once.items()} == {k: v.tobytes() for k, v in each.items()}


def test_work_held_across_chunks_prices_every_candidate_as_alone() -> None:
    # The bounded search prices a chunk at a time through one WorkMemo: a code's work computed for an
    # earlier chunk is copied, not computed again, and every price stays the one it has alone.
    prepared = prepare(example("qwen3_30b_a3b"))
    space = search_space(prepared, 16, global_batch=256, seq_len=4096, vpp=(1, 2),
                         base=Strategy().with_(device="h100@dgx_h100"))
    valid, codes = valid_with_codes(space, prepared.columns)
    memo, half = WorkMemo(), len(valid) // 2
    first = price_fit(prepared, valid.take(slice(0, half)), codes[:half], memo)
    second = price_fit(prepared, valid.take(slice(half, None)), codes[half:], memo)
    assert np.isin(codes[half:], codes[:half]).any()   # the second half finds some of its work held
    assert sum(len(block[0]) for block in memo.blocks) == len(np.unique(codes))   # each code's work kept once
    alone = price_fit(prepared, valid)
    for k in range(2):
        assert np.array_equal(np.concatenate([first[k], second[k]]), alone[k], equal_nan=True)


def test_an_empty_grid_prices_to_empty_arrays() -> None:
    """A chunk every rule refused has nothing to price: empty times and peaks, not an error."""
    prepared = prepare(example("llama3_8b"))
    space = search_space(prepared, 64, global_batch=256, seq_len=4096, base=Strategy().with_(device="h100"))
    valid, codes = valid_with_codes(space, prepared.columns)
    none = valid.take(slice(0, 0))
    times, peaks = price_fit(prepared, none, codes[:0])
    assert (times.shape, peaks.shape) == ((0,), (0,))
