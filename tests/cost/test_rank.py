"""The search a user trusts: inputs checked, equivalent strategies collapsed, the frontier."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from cost_builders import ROOT, dense_model

from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.feasibility.problems import InvalidStrategyError
from hpdsl.cost.search import search
from hpdsl.cost.sweep.rank import canonical_zero, collapse, pareto, search_input_reasons
from hpdsl.model.strategy import Strategy


def _hpdsl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(("flags", "reasons"), [
    (("--devices", "0"), ["devices must be at least 1"]),
    (("--devices", "8", "--memory-gib", "-1"), ["memory per device"]),
    (("--devices", "8", "--memory-gib", "inf"), ["memory per device"]),
    (("--devices", "8", "--memory-gib", "nan"), ["memory per device"]),
    (("--devices", "8", "--top", "0"), ["top must be at least 1"]),
    (("--devices", "8", "--micro-batches", "0"), ["micro-batches must all be at least 1"]),
    (("--devices", "8", "--micro-batches", "2,2"), ["micro-batches repeats a value"]),
    (("--devices", "0", "--top", "0", "--vpp", "1,1"),
     ["devices must be at least 1", "top must be at least 1", "vpp repeats a value"]),
])
def test_bad_search_inputs_exit_2_with_every_reason(flags: tuple[str, ...], reasons: list[str]) -> None:
    run = _hpdsl("search", "examples/llama2_7b.hpf", *flags)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    for reason in reasons:
        assert reason in run.stderr


def test_the_api_refuses_them_too() -> None:
    with pytest.raises(InvalidStrategyError) as error:
        search(dense_model(), 0, -1.0, top=0, micro_batches=(1, 1))
    assert len(error.value.reasons) == 4
    assert search_input_reasons(8, None, 10) == ()


def test_zero_levels_with_nothing_to_shard_become_one_candidate() -> None:
    grid = StrategyGrid.from_strategies([Strategy(zero=z) for z in ("none", "os", "os+grad")]
                                        + [Strategy(dp=2, zero="os")])
    assert list(canonical_zero(grid).zero) == [0, 0, 0, 1]


def test_collapse_keeps_one_row_per_price_and_counts_the_rest() -> None:
    times, peaks = np.array([2.0, 1.0, 1.0, 3.0, 1.0]), np.array([5.0, 4.0, 4.0, 1.0, 6.0])
    reps, counts = collapse(times, peaks, np.arange(5))
    assert list(reps) == [1, 4, 0, 3] and list(counts) == [2, 1, 1, 1]
    front, front_counts = pareto(times, peaks, np.arange(5))
    assert list(front) == [3, 1] and list(front_counts) == [1, 2]  # by peak: 1 GiB slowest, 4 fastest


def test_search_never_shows_two_rows_with_the_same_numbers() -> None:
    result = search(dense_model(), 8, top=50)
    prices = [(e.step_time_s, e.memory.peak_bytes) for e in result.top]
    assert len(prices) == len(set(prices))
    assert sum(result.stands_for) > len(result.top)  # some rows stand for several strategies
    one = search(dense_model(), 1, top=50)
    assert all(e.strategy.zero == "none" for e in one.top)  # ZeRO at dp 1 is no ZeRO


def test_pareto_rows_trade_memory_for_time() -> None:
    result = search(dense_model(), 8, top=100, pareto=True)
    assert result.pareto
    peaks = [e.memory.peak_bytes for e in result.top]
    times = [e.step_time_s for e in result.top]
    assert peaks == sorted(peaks) and times == sorted(times, reverse=True)
    assert len(set(times)) == len(times)


def test_search_rows_say_whether_sequence_parallelism_is_on() -> None:
    for e in search(dense_model(), 4, top=20).top:
        assert e.strategy.sequence_parallel is (e.strategy.tp > 1)
    run = _hpdsl("search", "examples/llama2_7b.hpf", "--devices", "8", "--json", "--top", "3")
    assert '"sequence_parallel": null' not in run.stdout and '"stands_for"' in run.stdout
