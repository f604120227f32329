"""What a search shows: its inputs checked, equivalent strategies collapsed, the memory/time frontier.

Kept apart from the enumeration (hpdsl/cost/search.py) so that each can change
alone. Two strategies are equivalent when they differ only where it cannot
matter: ZeRO levels with nothing to shard over (dp·cp = 1 and one expert
data-parallel rank) are made the same candidate before pricing
(`canonical_zero`), and candidates with bit-identical step time and peak
memory (a cp/dp swap the model prices the same, say) collapse into one row
that says how many it stands for (`collapse`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hpdsl.cost.facts.bounds import search_bound_reasons
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.facts.precision import OPTIMIZERS, PRECISIONS
from hpdsl.cost.feasibility.problems import InvalidStrategyError
from hpdsl.model.strategy import IMPLS


def search_input_reasons(devices: int, memory_bytes: float | None, top: int, *,
                         micro_batches: Sequence[int] = (1,), vpp: Sequence[int] = (1,),
                         global_batch: int = 1, seq_len: int = 1, precision: str = "bf16-mixed",
                         optimizer: str = "adam", impl: str = "fused", softmax_bytes: int = 2
                         ) -> tuple[str, ...]:
    """Return every reason the search's inputs are unusable (empty: they are fine)."""
    reasons: list[str] = []
    if devices < 1:
        reasons.append(f"devices must be at least 1, got {devices}")
    # The layouts factor the count and each top strategy is estimated in full: bounded (hpdsl/cost/facts/bounds.py).
    reasons += search_bound_reasons(devices, top, (("micro-batches", micro_batches), ("vpp", vpp)),
                                    global_batch, seq_len)
    if memory_bytes is not None and not (math.isfinite(memory_bytes) and memory_bytes > 0):
        reasons.append(f"memory per device must be a positive finite size, got {memory_bytes / 1024**3} GiB")
    if top < 1:
        reasons.append(f"top must be at least 1, got {top}")
    for name, values in (("micro-batches", micro_batches), ("vpp", vpp)):
        if not values:
            reasons.append(f"{name} names no value")
        if any(v < 1 for v in values):
            reasons.append(f"{name} must all be at least 1, got {', '.join(map(str, values))}")
        if len(set(values)) != len(values):
            reasons.append(f"{name} repeats a value: {', '.join(map(str, values))}")
    if global_batch < 1:
        reasons.append(f"global batch must be at least 1, got {global_batch}")
    if seq_len < 1:
        reasons.append(f"seq-len must be at least 1, got {seq_len}")
    if precision not in PRECISIONS:
        reasons.append(f"precision '{precision}' is not one of {', '.join(PRECISIONS)}")
    if optimizer not in OPTIMIZERS:
        reasons.append(f"optimizer '{optimizer}' is not one of {', '.join(OPTIMIZERS)}")
    if impl not in IMPLS:
        reasons.append(f"impl '{impl}' is not one of {', '.join(IMPLS)}")
    if softmax_bytes < 1:
        reasons.append(f"softmax-bytes must be at least 1, got {softmax_bytes}")
    return tuple(reasons)


def require_search_inputs(reasons: tuple[str, ...]) -> None:
    """Raise InvalidStrategyError listing `reasons` (search_input_reasons) if there are any."""
    if reasons:
        listed = "\n".join(f"  - {reason}" for reason in reasons)
        raise InvalidStrategyError(f"cannot search:\n{listed}", reasons)


def canonical_zero(grid: StrategyGrid) -> StrategyGrid:
    """Return the grid with ZeRO set to none wherever it has nothing to shard over (dp·cp = 1, edp = 1)."""
    edp = grid.dp * grid.cp * grid.tp // np.maximum(grid.ep * grid.etp, 1)
    idle = (grid.dp * grid.cp == 1) & (edp == 1)
    if not np.any(idle & (grid.zero > 0)):
        return grid
    arrays = dict(grid.arrays)
    arrays["zero"] = np.where(idle, 0, grid.zero)
    return StrategyGrid(arrays, grid.splits, grid.devices)


def collapse(times: np.ndarray, peaks: np.ndarray, candidates: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Return (representatives, how many each stands for) of `candidates` ranked by (time, peak).

    Candidates with the same step time and peak bytes are one row; the first in
    enumeration order represents them.
    """
    order = candidates[np.lexsort((candidates, peaks[candidates], times[candidates]))]
    if not len(order):
        return order, np.zeros(0, dtype=np.int64)
    t, p = times[order], peaks[order]
    starts = np.concatenate([[True], (t[1:] != t[:-1]) | (p[1:] != p[:-1])])
    first = np.nonzero(starts)[0]
    counts = np.diff(np.concatenate([first, [len(order)]]))
    return order[first], counts


def pareto(times: np.ndarray, peaks: np.ndarray, candidates: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """Return (representatives, how many each stands for) on the memory/step-time frontier, by peak memory.

    A candidate is on the frontier when no other is both at most as large in
    peak memory and faster; equal candidates collapse as in `collapse`.
    """
    reps, counts = collapse(times, peaks, candidates)
    if not len(reps):
        return reps, counts
    by_peak = np.lexsort((times[reps], peaks[reps]))
    t = times[reps][by_peak]
    best_before = np.concatenate([[np.inf], np.minimum.accumulate(t)[:-1]])
    keep = by_peak[t < best_before]
    return reps[keep], counts[keep]
