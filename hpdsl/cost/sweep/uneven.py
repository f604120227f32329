"""Uneven pipeline splits of the promising candidates: a lighter first or last stage that may fit or balance."""

from __future__ import annotations

from functools import cache

import numpy as np

from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.price.grid import WorkMemo, price_fit
from hpdsl.cost.price.pipeline_layout import even_split
from hpdsl.cost.price.types import Prepared
from hpdsl.cost.sweep.space import plain_invalid

UNEVEN_TRIED = 32
"""Pipelined candidates whose uneven splits are priced: the fastest that fit or nearly fit."""
NEAR_FIT = 1.25
"""A candidate whose peak is within this factor of the capacity may fit with a lighter first or last stage."""


def with_uneven_splits(prepared: Prepared, grid: StrategyGrid, times: np.ndarray, peaks: np.ndarray,
                       capacity: float) -> tuple[StrategyGrid, np.ndarray, np.ndarray]:
    """Return the grid, times and peaks with uneven pipeline splits of the promising candidates appended."""
    extra, extra_times, extra_peaks = uneven_candidates(prepared, grid, times, peaks, capacity)
    if extra is None:
        return grid, times, peaks
    merged = StrategyGrid({k: np.concatenate([grid.arrays[k], extra.arrays[k]]) for k in grid.arrays},
                          extra.splits, grid.devices)
    return merged, np.concatenate([times, extra_times]), np.concatenate([peaks, extra_peaks])


def uneven_candidates(prepared: Prepared, grid: StrategyGrid, times: np.ndarray, peaks: np.ndarray,
                      capacity: float, work: np.ndarray | None = None, memo: WorkMemo | None = None
                      ) -> tuple[StrategyGrid | None, np.ndarray, np.ndarray]:
    """Return the uneven pipeline splits of the promising candidates (None if none), their times and peaks.

    The first stage holds the embedding and the most micro-batches in flight, the
    last the output layer and the loss; a split whose first or last stage (or
    both) holds one or two body layers fewer, the rest spread over the other
    stages, can fit where the even one does not or balance the stages' times.
    Only the UNEVEN_TRIED fastest even-split pipelined candidates within
    NEAR_FIT of the capacity are tried, so the search stays as fast.
    """
    layers = prepared.columns.layers
    near = np.nonzero((grid.pp > 1) & (grid.vpp == 1) & (grid.split_id == 0) & (peaks <= capacity * NEAR_FIT))[0]
    if len(near) > UNEVEN_TRIED:  # only those up to the UNEVEN_TRIED-th time can be among the fastest
        kth = np.partition(times[near], UNEVEN_TRIED - 1)[UNEVEN_TRIED - 1]
        if kth == kth:
            near = near[times[near] <= kth]
    picked = near[np.lexsort((peaks[near], times[near]))][:UNEVEN_TRIED]
    splits = list(grid.splits)
    rows, ids = [], []
    for i in picked:
        for split in uneven_splits(layers, int(grid.pp[i])):
            if split not in splits:
                splits.append(split)
            rows.append(i)
            ids.append(splits.index(split))
    if not rows:
        return None, np.zeros(0), np.zeros(0)
    extra = grid.take(np.asarray(rows))
    extra = StrategyGrid({**extra.arrays, "split_id": np.asarray(ids, dtype=np.int64)}, tuple(splits),
                         grid.devices)
    ok = ~plain_invalid(prepared, extra)
    # A split changes only the layout: the candidates of one even one do the same work (price_fit's `same`),
    # held in the search's `memo` where it gives the grid's `work` codes.
    same = np.asarray(rows)[ok] if work is None or memo is None else work[np.asarray(rows)[ok]]
    return (extra.take(ok), *price_fit(prepared, extra.take(ok), same, memo if work is not None else None))


@cache
def uneven_splits(layers: int, stages: int) -> tuple[tuple[int, ...], ...]:
    """Return the splits of `layers` over `stages` whose first, last or both ends hold one or two layers fewer than the even split."""
    base = even_split(layers, stages)
    out: list[tuple[int, ...]] = []
    ends = ((0,), (stages - 1,), (0, stages - 1)) if stages > 2 else ((0,), (stages - 1,))
    for lighter in (1, 2):
        for end in ends:
            counts = list(base)
            for e in end:
                counts[e] -= lighter
            others = [c for c in range(stages) if c not in end]
            for k in range(lighter * len(end)):
                counts[others[k % len(others)]] += 1
            split = tuple(counts)
            if min(split) >= 1 and split != base and split not in out:
                out.append(split)
    return tuple(out)
