"""Strategies priced per second: the vectorised grid path beside the scalar API, in one run, one core.

For DeepSeek-V3 and Qwen3-Next-80B-A3B (examples/*.hpf) it enumerates every
strategy of the search for a device count (all factorisations, micro-batch
sizes, recompute choices, ZeRO levels, CP kinds), keeps the valid ones, and
times, best of several runs:

- the vectorised path: `price_grid` over the grid in the search's chunks;
- the scalar path: `estimate(prepared, strategy)` (the Prepared held) for a sample of the same
  strategies, one at a time (what a loop over candidates would cost).

It prints strategies per CPU second for each and their ratio. The thread variables
are pinned to 1 before numpy loads, so both paths run on one core. Target:
at least 1,000,000 strategies/s for DeepSeek-V3 through the vectorised path.

    .venv/bin/python bench/bench_search.py [--devices 1024] [--scalar 300] [--repeat 3]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                  "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from hpdsl.api import bind_model  # noqa: E402
from hpdsl.cost.estimate import estimate  # noqa: E402
from hpdsl.cost.facts.grid import StrategyGrid  # noqa: E402
from hpdsl.cost.feasibility.rules import invalid_mask  # noqa: E402
from hpdsl.cost.heap import keep_freed_memory  # noqa: E402
from hpdsl.cost.price.grid import price_grid
from hpdsl.cost.price.prepare import prepare
from hpdsl.cost.price.types import Prepared  # noqa: E402
from hpdsl.cost.sweep.chunks import CHUNK  # noqa: E402
from hpdsl.cost.sweep.space import enumerate_grid

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MODELS = ("deepseek_v3", "qwen3_next_80b_a3b")


def best_of(repeat: int, run) -> float:  # type: ignore[no-untyped-def]
    """Return the best CPU time of `repeat` calls of `run`."""
    times = []
    for _ in range(repeat):
        start = time.process_time()  # CPU seconds: one thread, steady on a loaded machine
        run()
        times.append(time.process_time() - start)
    return min(times)


def grid_for(prepared: Prepared, devices: int) -> tuple[StrategyGrid, int, float]:
    """Return the valid candidates for `devices`, how many were enumerated, and the seconds it took."""
    start = time.process_time()
    grid = enumerate_grid(prepared, devices, global_batch=1024, seq_len=4096)
    valid = grid.take(~invalid_mask(prepared.columns, grid))
    return valid, len(grid), time.process_time() - start


def price_all(prepared: Prepared, grid: StrategyGrid) -> None:
    """Price every candidate through the vectorised path, CHUNK at a time (as the search does)."""
    for lo in range(0, len(grid), CHUNK):
        price_grid(prepared, grid.take(slice(lo, min(len(grid), lo + CHUNK))))  # type: ignore[arg-type]


def bench_model(name: str, devices: int, scalar: int, repeat: int) -> None:
    """Print the vectorised and scalar rates for one example model."""
    cost_model = bind_model([EXAMPLES / f"{name}.hpf"])  # with the families' layout limits
    prepared = prepare(cost_model)
    grid, enumerated, enumerate_s = grid_for(prepared, devices)
    vector_s = best_of(repeat, lambda: price_all(prepared, grid))
    sample = np.linspace(0, len(grid) - 1, min(scalar, len(grid))).astype(int)
    strategies = [grid.strategy(int(i)) for i in sample]
    scalar_s = best_of(repeat, lambda: [estimate(prepared, s) for s in strategies])  # its PriceCache held
    vector_rate, scalar_rate = len(grid) / vector_s, len(strategies) / scalar_s
    print(f"{name} on {devices} devices: {enumerated:,} candidates, {len(grid):,} valid "
          f"(enumerated and checked in {enumerate_s:.2f} s)")
    print(f"  vectorised: {vector_rate:>12,.0f} strategies/s ({vector_s:.3f} s for {len(grid):,})")
    print(f"  scalar API: {scalar_rate:>12,.0f} strategies/s ({scalar_s / len(strategies) * 1e3:.3f} ms "
          f"per strategy, {len(strategies)} sampled)")
    print(f"  ratio vectorised / scalar: {vector_rate / scalar_rate:,.0f}x")


def main() -> None:
    """Run the benchmark for both example models."""
    keep_freed_memory()  # as the search does (hpdsl/cost/heap.py)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=1024)
    parser.add_argument("--scalar", type=int, default=300, help="strategies priced one at a time")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for name in MODELS:
        bench_model(name, args.devices, args.scalar, args.repeat)


if __name__ == "__main__":
    main()
