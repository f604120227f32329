"""A grid priced a chunk at a time, and the bounded search, behind a progress bar that shows only on a long search."""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from hpdsl.cost.facts.bounds import MAX_CANDIDATES
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.price.grid import price_fit
from hpdsl.cost.price.types import Prepared
from hpdsl.cost.sweep.prune import Goal, Pruned, bounded_search, row_count
from hpdsl.cost.sweep.space import Space

CHUNK = 1 << 13
"""Candidates priced per numpy pass: big enough to amortise numpy's call overhead, small enough for cache."""


PROGRESS_AFTER = 1.0
"""Seconds a search runs before its progress bar shows."""


def bounded(prepared: Prepared, space: Space, goal: Goal, progress: bool | None, start: float) -> Pruned:
    """Return the bounded search's priced candidates, with the progress bar of price_chunks."""
    total = row_count(space) * space.sizes[3] * space.sizes[4]
    show = (sys.stderr.isatty() if progress is None else progress) and total > CHUNK
    bar = _progress_bar(total, max(0.0, PROGRESS_AFTER - (time.perf_counter() - start))) if show else None
    try:
        return bounded_search(prepared, space, goal, MAX_CANDIDATES, None if bar is None else bar.update)
    finally:
        if bar is not None:
            bar.close()


def price_chunks(prepared: Prepared, grid: StrategyGrid, progress: bool | None,
                 start: float) -> tuple[np.ndarray, np.ndarray]:
    """Return (step time, peak bytes) of every candidate, priced CHUNK at a time.

    The progress bar (on a terminal, or when `progress`) appears only once the
    search has run for PROGRESS_AFTER seconds: a quick search prints nothing.
    """
    n = len(grid)
    times, peaks = np.empty(n), np.empty(n)
    show = (sys.stderr.isatty() if progress is None else progress) and n > CHUNK
    bar = _progress_bar(n, max(0.0, PROGRESS_AFTER - (time.perf_counter() - start))) if show else None
    try:
        for lo in range(0, n, CHUNK):
            part = slice(lo, min(n, lo + CHUNK))
            times[part], peaks[part] = price_fit(prepared, grid.take(part))
            if bar is not None:
                bar.update(part.stop - part.start)
    finally:
        if bar is not None:
            bar.close()
    return times, peaks


def _progress_bar(total: int, delay: float) -> Any:
    """Return a tqdm bar on stderr that stays hidden for `delay` seconds."""
    from tqdm import tqdm

    return tqdm(total=total, unit="strategy", unit_scale=True, file=sys.stderr, desc="pricing", delay=delay)
