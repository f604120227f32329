"""The vectorised strategy search: enumeration, filtering, ranking, and the CLI body."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
from cost_builders import ROOT, dense_model, example, moe_model

from hpdsl.cost.estimate import estimate
from hpdsl.cost.feasibility.reasons import validate_strategy
from hpdsl.cost.feasibility.rules import invalid_mask
from hpdsl.cost.price.prepare import prepare
from hpdsl.cost.search import search
from hpdsl.cost.sweep.space import enumerate_grid, layouts
from hpdsl.cost.sweep.uneven import with_uneven_splits
from hpdsl.model.strategy import CP_KINDS, RECOMPUTE, ZERO

GIB = 1024**3


def test_layouts_factor_the_devices_and_fit_experts_in_the_mesh() -> None:
    rows = layouts(16, experts=8)
    tp, cp, pp, dp, ep, etp = rows.T
    assert np.all(tp * cp * pp * dp == 16)
    assert np.all((dp * cp * tp) % (ep * etp) == 0)
    assert np.all(8 % ep == 0)
    assert len({tuple(r) for r in rows}) == len(rows)
    assert set(layouts(16, experts=1)[:, 4]) == {1}


def test_layouts_left_out_early_are_ones_the_rules_refuse() -> None:
    # A dp not dividing the global batch, a cp not dividing the sequence, or more stages than
    # layers is refused for every micro-batch, cp kind and vpp: pruning them keeps every valid row.
    every = {tuple(r) for r in layouts(96, experts=8)}
    kept = {tuple(r) for r in layouts(96, experts=8, cp_of=64, dp_of=12, pp_max=3)}
    assert kept < every
    for tp, cp, pp, dp, ep, etp in every:
        assert ((tp, cp, pp, dp, ep, etp) in kept) == (64 % cp == 0 and 12 % dp == 0 and pp <= 3)


def test_the_pruned_search_finds_every_valid_candidate() -> None:
    prepared = prepare(moe_model())
    grid = enumerate_grid(prepared, 16, global_batch=4, seq_len=256)
    valid = grid.take(~invalid_mask(prepared.columns, grid))
    fields = ("tp", "cp", "pp", "dp", "ep", "etp", "micro_batch", "recompute", "zero", "cp_kind")
    found = {tuple(getattr(s, f) for f in fields) for s in (valid.strategy(i) for i in range(len(valid)))}
    base = grid.strategy(0)
    rows = layouts(16, experts=max(c.experts for c in prepared.columns.configs))
    every = set()
    for row in rows:
        layout = dict(zip(fields, map(int, row)))
        for mb, recompute, zero, kind in itertools.product((1, 2, 4, 8), RECOMPUTE, ZERO, CP_KINDS):
            if kind != base.cp_kind and layout["cp"] == 1:
                continue
            strategy = base.with_(**layout, micro_batch=mb, recompute=recompute, zero=zero, cp_kind=kind,
                                  sequence_parallel=layout["tp"] > 1)
            if validate_strategy(strategy, prepared.columns) == ():
                every.add(tuple(getattr(strategy, f) for f in fields))
    assert found == every and len(found) > 100


def test_enumeration_covers_every_choice() -> None:
    prepared = prepare(moe_model())
    grid = enumerate_grid(prepared, 8, global_batch=16, seq_len=256)
    valid = grid.take(~invalid_mask(prepared.columns, grid))
    assert set(valid.micro_batch.tolist()) == {1, 2, 4, 8}
    assert set(valid.recompute.tolist()) == {0, 1, 2} and set(valid.zero.tolist()) == {0, 1, 2, 3}
    assert set(valid.cp_kind[valid.cp > 1].tolist()) == {0, 1}
    assert np.all(valid.pp[:-1] <= valid.pp[1:])  # sorted by pipeline layout for grouping
    for i in range(0, len(valid), 97):
        assert validate_strategy(valid.strategy(i), prepared.columns) == ()


def test_search_ranks_fitting_valid_strategies_by_step_time() -> None:
    result = search(moe_model(), 8, 1 * GIB, global_batch=16, seq_len=256, top=5)
    assert 0 < len(result.top) <= 5 and result.fitting <= result.valid <= result.enumerated
    times = [e.step_time_s for e in result.top]
    assert times == sorted(times)
    for e in result.top:
        assert e.memory.peak_bytes <= 1 * GIB
        assert e.strategy.devices == 8 and validate_strategy(e.strategy, moe_model()) == ()


def test_search_agrees_with_pricing_every_candidate_one_at_a_time() -> None:
    cost_model = dense_model(layers=4)
    prepared = prepare(cost_model)
    grid = enumerate_grid(prepared, 4, global_batch=8, seq_len=256, micro_batches=(1, 2))
    valid = grid.take(~invalid_mask(prepared.columns, grid))
    scalar = [estimate(prepared, valid.strategy(i)) for i in range(len(valid))]
    capacity = int(np.median([e.memory.peak_bytes for e in scalar]))
    fitting = [e for e in scalar if e.memory.peak_bytes <= capacity]
    # The uneven pipeline splits the search adds, each priced one at a time too.
    times = np.array([e.step_time_s for e in scalar])
    peaks = np.array([float(e.memory.peak_bytes) for e in scalar])
    merged, _, _ = with_uneven_splits(prepared, valid, times, peaks, capacity)
    assert len(merged) > len(valid)
    fitting += [e for e in (estimate(prepared, merged.strategy(i)) for i in range(len(valid), len(merged)))
                if e.memory.peak_bytes <= capacity]
    best = min(fitting, key=lambda e: (e.step_time_s, e.memory.peak_bytes))
    result = search(prepared, 4, capacity, global_batch=8, seq_len=256, micro_batches=(1, 2), top=3)
    assert result.fitting == len(fitting)
    assert result.top[0].step_time_s == best.step_time_s


def test_nothing_fits() -> None:
    result = search(dense_model(), 2, 1024, global_batch=4, seq_len=128)
    assert result.top == () and result.fitting == 0
    run = _hpdsl("search", "examples/llama2_7b.hpf", "--devices", "1", "--memory-gib", "1",
                 "--global-batch", "4")
    assert run.returncode == 0 and "no strategy fits" in run.stdout


def test_qwen3_next_on_64_devices() -> None:
    result = search(example("qwen3_next_80b_a3b"), 64, 80 * GIB, top=3)
    assert len(result.top) == 3 and result.enumerated > 10_000
    assert all(e.memory.fits for e in result.top)


def test_search_command_json_and_errors() -> None:
    spec = "examples/mixtral_8x7b.hpf"
    run = _hpdsl("search", spec, "--devices", "16", "--memory-gib", "80", "--top", "2", "--json",
                 "--micro-batches", "1,2")
    data = json.loads(run.stdout)
    assert run.returncode == 0 and len(data["top"]) == 2 and data["devices"] == 16
    assert data["top"][0]["step_time_s"] <= data["top"][1]["step_time_s"]
    run = _hpdsl("search", spec, "--devices", "16", "--micro-batches", "one")
    assert run.returncode == 2 and "--micro-batches" in run.stderr
    assert _hpdsl("search", spec).returncode == 2  # --devices is required


def _hpdsl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
