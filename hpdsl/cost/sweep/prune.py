"""Lower bounds on a search's candidates, and the search that skips whatever its bounds rule out.

A bound row is one (vpp, layout, micro-batch, cp kind) of a search's space: it
stands for the candidates that differ only in recompute and ZeRO (for a frontier,
`split`, also one recompute choice: its time then counts the recompute's seconds
and its memory that choice's activations). Its bounds
come from the pricing's own expressions (hpdsl/cost/price/grid.py,
hpdsl/cost/price/ranks.py, hpdsl/cost/formulas/stage.py), evaluated the same way, with
terms left out that are never negative:

- step time: every rank's micro-batch time without its recompute (tau_rec ≥ 0)
  and without ZeRO's exposed per-micro-batch reduction (max(0, ·)), and no
  per-step reduction after the last backward (≥ 0). A column's compute and
  traffic seconds read neither recompute nor ZeRO, so these are the candidates'
  own sums with non-negative terms dropped.
- peak bytes: per rank, the static bytes at the row's strongest ZeRO level
  (sharding only divides) plus the fewest activation bytes any of its recompute
  choices keeps, without the transient bytes (≥ 0).

Float addition and multiplication by a non-negative number are monotone, so a
bound is at most its candidates' priced values (tests/cost/test_prune.py holds
it for every candidate). The search prices bound rows in increasing time bound,
a chunk at a time, and skips a row only when its bounds are strictly worse than
what the candidates priced so far guarantee: the answer is the exhaustive one.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.formulas import comm as comm_mod
from hpdsl.cost.formulas import stage
from hpdsl.cost.formulas import xp
from hpdsl.cost.formulas import memory as mem
from hpdsl.cost.formulas.context import context
from hpdsl.cost.price import ranks
from hpdsl.cost.price.grid import WORK_LINKS, Work, WorkMemo, price_fit, representatives, some_columns, work_table
from hpdsl.cost.price.pipeline_layout import in_flight
from hpdsl.cost.price.types import Prepared
from hpdsl.cost.sweep.rank import canonical_zero
from hpdsl.cost.sweep.space import Space, plain_invalid, too_many
from hpdsl.model.strategy import CP_KINDS

BOUND_CHUNK = 1 << 13
"""Candidates priced between two updates of the thresholds."""


def bound_rows(space: Space, split: bool = False) -> tuple[np.ndarray, ...]:
    """Return the index arrays (vpp, layout, micro-batch, recompute, cp kind) of the bound rows, in enumeration order.

    With `split` each recompute choice is a row of its own (bounds closer to its
    candidates, three times as many to compute); without, recompute is 0 throughout
    and a row stands for every choice.
    """
    s = space.sizes
    sizes = (s[0], s[1], s[2], s[3] if split else 1, s[5])
    index = [np.tile(np.repeat(np.arange(size), math.prod(sizes[k + 1:])), math.prod(sizes[:k]))
             for k, size in enumerate(sizes)]
    keep = space.kept(index[1], index[4])
    return tuple(i[keep] for i in index)


def row_count(space: Space, split: bool = False) -> int:
    """Return len(bound_rows(space, split)[0]) without building them (the guard runs first)."""
    s = space.sizes
    single = int(np.count_nonzero(space.rows[:, 1] == 1))   # cp 1: only the base cp kind is kept
    base = int(np.count_nonzero(space.options[5] == CP_KINDS.index(space.base.cp_kind)))
    return s[0] * s[2] * (s[3] if split else 1) * (single * base + (s[1] - single) * s[5])


BOUND_SLICE = 1 << 15
"""Bound rows computed per numpy pass (cache-sized, like pricing's CHUNK)."""

BOUND_LINKS = ("bw_pp",)
"""The context's link fields (LINK_FIELDS) a bound row's own context is read for: its work's are the representatives'."""


def bounds(prepared: Prepared, space: Space, rows: tuple[np.ndarray, ...], split: bool = False,
           memo: WorkMemo | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Return (step-time bound, peak-bytes bound) of each bound row (bound_rows(space, split)): at most its candidates' prices.

    `memo` keeps the rows' work (their candidates' at the rows' recompute) for the search's pricing.
    """
    vi, ri, mi, ci, ki = rows
    # Each row once, at its recompute choice (the first, unless split) and the strongest ZeRO level.
    zi = np.full(len(vi), int(np.argmax(space.options[4])))
    times, peaks = np.full(len(vi), np.nan), np.full(len(vi), np.nan)
    key = (space.rows[ri, 2] << 20) | space.options[0][vi]
    edges = sorted({0, len(vi), *(np.flatnonzero(key[1:] != key[:-1]) + 1).tolist(),
                    *range(0, len(vi), BOUND_SLICE)})
    recompute = None if split else tuple(int(r) for r in space.options[3])
    run = prepared.columns.cost_model.profile.run
    with np.errstate(divide="ignore", invalid="ignore"):
        # The columns' work is computed once per mesh, micro-batch, recompute and cp kind, for
        # every (pp, vpp): the context is elementwise, and a space's candidates share its grid-wide
        # facts (one device, one implementation), so its rows' context is theirs in any grid.
        codes, index, inverse = np.unique(space.work_codes(ri, mi, ci, ki), return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        xu = representatives(context(space.grid(*(a[index] for a in (vi, ri, mi, ci, zi, ki))), run, WORK_LINKS))
        table = work_table(prepared, xu)
        if memo is not None:
            memo.add(codes, table)
        deltas = None if recompute is None else _deltas(prepared, xu, table, recompute)
        for lo, hi in zip(edges[:-1], edges[1:]):
            part = slice(lo, hi)
            x = context(space.grid(*(a[part] for a in (vi, ri, mi, ci, zi, ki))), run, BOUND_LINKS)
            times[part], peaks[part] = _group_bounds(prepared, x, (table, inverse[part]), deltas)
    return times, peaks


def _group_bounds(p: Prepared, x: Any, work: Work, deltas: dict[int, list[np.ndarray]] | None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Return the bounds of bound rows of one (pp, vpp): the pricing's sums without its non-negative terms.

    `deltas` are, per recompute choice a row stands for, the activation bytes each
    column keeps beyond none (of the work's representatives): the fewest of any is
    its memory bound, and its time leaves recompute out. None: each row's own.
    """
    # What the bounds read: compute, traffic and activations (none reads ZeRO) and the static bytes.
    cw = some_columns(p, x, work, ("act_none", "static", "tau") + (("act_delta", "tau_rec") if deltas is None else ()))
    layout = p.layout(int(x.pp[0]), int(x.vpp[0]), None)
    g = ranks.group(p, x, cw, layout)
    chunks = g.chunks_of
    kept = ranks.weighted_sum(chunks.counts, cw.act_none, chunks.spans)
    static = g.spread(g.ranks(cw.static))
    flight = in_flight(layout.stages, layout.vpp, x.micro_batches)
    held = fewest = None
    inverse = work[1]
    own = {-1: cw.act_delta} if deltas is None else {code: [d[inverse] for d in cols] if code else []
                                                     for code, cols in deltas.items()}
    for code, delta in own.items():   # the fewest any recompute choice keeps, per rank
        # No recompute (code 0) keeps nothing beyond none (_deltas: zeros), and kept + 0.0 is kept.
        per_chunk = kept if code == 0 else kept + ranks.weighted_sum(chunks.recomputed, delta, chunks.spans)
        if layout.vpp == 1:
            # One chunk per rank: static + flight·bytes is monotone in the bytes (flight ≥ 1, rounding is
            # monotone), so the least total is that of the fewest bytes, found on the distinct chunks.
            fewest = per_chunk if fewest is None else np.minimum(fewest, per_chunk)
            continue
        total = static + ranks.per_rank_sum(flight * per_chunk[chunks.inverse], layout.stages, layout.vpp)
        held = total if held is None else np.minimum(held, total)
    if fewest is not None:
        held = static + ranks.per_rank_sum(flight * fewest[chunks.inverse], layout.stages, layout.vpp)
    assert held is not None
    t_row = g.ranks(cw.tau, cw.tau_rec if deltas is None else None) + comm_mod.pipeline_bytes(x, p.columns.cost_model.model.hidden) / x.bw_pp
    step = stage.step_time(x, np.add.accumulate(g.spread(t_row), axis=0)[-1], t_row.max(axis=0), 0.0,
                           layout.vpp)
    return step, held.max(axis=0)


def _deltas(p: Prepared, xu: Any, table: list[dict[str, np.ndarray]], codes: tuple[int, ...]
            ) -> dict[int, list[np.ndarray]]:
    """Return per recompute code and column the activation bytes it keeps beyond none, as pricing.column_values does.

    Of the work's representatives `xu` (their `table`): spread to the rows by the caller.
    """
    out: dict[int, list[np.ndarray]] = {code: [] for code in codes}
    for j, work in enumerate(table):
        none = work["act_none"]
        layer = p.columns.columns[j].role in ("layer", "mtp")
        kept = mem.activation(p.act[j], xu) if layer and any(codes) else (none, none, none)
        for code in codes:
            out[code].append(np.asarray(xp.broadcast(kept[code] - none, xu.tokens)) if layer and code
                             else np.zeros_like(none))
    return out


@attrs.frozen(eq=False)
class Pruned:
    """What the bounded search priced (valid candidates, in enumeration order) and what it skipped."""

    grid: StrategyGrid
    times: np.ndarray
    peaks: np.ndarray
    checked: int    # candidates whose validity was checked (the rest were skipped by bound)
    skipped: int    # candidates neither checked nor priced: their bounds could not beat the answer
    work: np.ndarray | None = None  # each candidate's work code (Space.work_codes), whose work `memo` holds
    memo: WorkMemo | None = None


@attrs.frozen(eq=False)
class Goal:
    """What the answer needs: the top rows (or the frontier) and the uneven pass's near-fitting candidates."""

    top: int
    pareto: bool
    capacity: float
    near_fit: float      # a pipelined candidate within capacity·near_fit is one the uneven pass may try
    near_tried: int      # how many of the fastest near-fitting ones it tries


def bounded_search(prepared: Prepared, space: Space, goal: Goal, limit: int,
                   progress: Any = None) -> Pruned:
    """Return the valid candidates priced in increasing time bound, skipping those that cannot matter."""
    # The frontier pairs speed with memory: a row per recompute choice keeps the two bounds one candidate's.
    split = goal.pareto
    if row_count(space, split) > limit:
        raise too_many(row_count(space, split), "bound", "groups of candidates")
    rows = bound_rows(space, split)
    per_row = space.sizes[4] * (1 if split else space.sizes[3])
    memo = WorkMemo()
    t_lb, m_lb = bounds(prepared, space, rows, split, memo)
    pipelined = (space.rows[rows[1], 2] > 1) & (space.options[0][rows[0]] == 1)
    # A row whose every candidate is past the capacity (past the near-fit one if pipelined) cannot matter.
    reach = np.where(pipelined, goal.capacity * goal.near_fit, goal.capacity)
    alive = np.flatnonzero(~(m_lb > reach))
    alive = alive[stable_order(t_lb[alive])]
    if progress is not None:
        progress((len(rows[0]) - len(alive)) * per_row)
    state = _Thresholds(goal)
    parts: list[tuple[np.ndarray, StrategyGrid, np.ndarray, np.ndarray]] = []
    checked = priced = 0
    step = max(1, BOUND_CHUNK // per_row)
    for lo in range(0, len(alive), step):
        chunk = alive[lo:lo + step]
        chunk = chunk[~state.prunes(t_lb[chunk], m_lb[chunk], pipelined[chunk])]
        part = _price_rows(prepared, space, rows, chunk, split, memo) if len(chunk) else None
        checked += len(chunk) * per_row
        if part is not None:
            priced += len(part[1])
            if priced > limit:
                raise too_many(priced)
            parts.append(part)
            state.add(part[2], part[3], (part[1].pp > 1) & (part[1].vpp == 1))
        if progress is not None:
            progress(len(alive[lo:lo + step]) * per_row)
    return attrs.evolve(_merged(parts, space, checked, len(rows[0]) * per_row - checked), memo=memo)


def stable_order(values: np.ndarray) -> np.ndarray:
    """Return np.argsort(values, kind="stable"): an unstable sort, then each run of equal values (NaNs one run) by index.

    A search's time bounds are mostly distinct (3% tie on DeepSeek-V3's 1,024 devices), and numpy's
    introsort takes about half its merge sort's time there; only the tied runs are sorted again, by index.
    """
    order = np.argsort(values)
    ordered = values[order]
    nan = np.isnan(ordered)
    tied = (ordered[1:] == ordered[:-1]) | (nan[1:] & nan[:-1])
    ties = int(np.count_nonzero(tied))
    if not ties:
        return order
    if ties > len(values) // 8:   # many ties: re-sorting them costs more than the merge sort saves
        return np.argsort(values, kind="stable")
    runs = np.concatenate([[0], np.cumsum(~tied)])   # each position's run of equal values
    at = np.flatnonzero(np.concatenate([tied, [False]]) | np.concatenate([[False], tied]))
    order[at] = order[at][np.lexsort((order[at], runs[at]))]
    return order


def _price_rows(prepared: Prepared, space: Space, rows: tuple[np.ndarray, ...], chunk: np.ndarray,
                split: bool, memo: WorkMemo) -> tuple[np.ndarray, StrategyGrid, np.ndarray, np.ndarray] | None:
    """Return the order codes, grid, times and peaks of the valid candidates of some bound rows (None: none valid)."""
    # Grouped by (pp, vpp), as pricing groups them (it need not reorder): the parts are merged by code.
    chunk = chunk[np.lexsort((space.options[0][rows[0][chunk]], space.rows[rows[1][chunk], 2]))]
    code, grid = _expand(space, rows, chunk, split)
    ok = ~plain_invalid(prepared, grid)
    if not np.any(ok):
        return None
    code, grid = code[ok], canonical_zero(grid.take(ok))
    return (code, grid, *price_fit(prepared, grid, _work_codes(space, code), memo))


def _expand(space: Space, rows: tuple[np.ndarray, ...], chunk: np.ndarray, split: bool
            ) -> tuple[np.ndarray, StrategyGrid]:
    """Return the candidates of the given bound rows (each with every ZeRO choice, and recompute one unless split) and their order codes."""
    s = space.sizes
    vi, ri, mi, ci, ki = (r[chunk] for r in rows)
    if split:
        vi, ri, mi, ci, ki = (np.repeat(a, s[4]) for a in (vi, ri, mi, ci, ki))
        zi = np.tile(np.arange(s[4]), len(chunk))
    else:
        ci = np.tile(np.repeat(np.arange(s[3]), s[4]), len(chunk))
        zi = np.tile(np.arange(s[4]), s[3] * len(chunk))
        vi, ri, mi, ki = (np.repeat(a, s[3] * s[4]) for a in (vi, ri, mi, ki))
    # The enumeration's mixed-radix position: sorting by it restores the exhaustive order.
    code = ((((vi * s[1] + ri) * s[2] + mi) * s[3] + ci) * s[4] + zi) * s[5] + ki
    return code, space.grid(vi, ri, mi, ci, zi, ki)


def _work_codes(space: Space, code: np.ndarray) -> np.ndarray:
    """Return the work codes (Space.work_codes) of candidates by their order codes (_expand's mixed radix)."""
    s = space.sizes
    ki, rest = code % s[5], code // (s[5] * s[4])   # the ZeRO digit dropped
    ci, rest = rest % s[3], rest // s[3]
    mi, rest = rest % s[2], rest // s[2]
    return space.work_codes(rest % s[1], mi, ci, ki)


def _merged(parts: list[tuple[np.ndarray, StrategyGrid, np.ndarray, np.ndarray]], space: Space,
            checked: int, skipped: int) -> Pruned:
    """Return the priced parts as one grid in enumeration order."""
    if not parts:
        empty = space.grid(*(np.zeros(0, dtype=np.int64),) * 6)
        return Pruned(empty, np.zeros(0), np.zeros(0), checked, skipped)
    code = np.concatenate([part[0] for part in parts])
    order = np.argsort(code, kind="stable")
    first = parts[0][1]
    grid = StrategyGrid({k: _joined([part[1].arrays[k] for part in parts], order) for k in first.arrays},
                        first.splits, first.devices)
    times = np.concatenate([part[2] for part in parts])[order]
    peaks = np.concatenate([part[3] for part in parts])[order]
    return Pruned(grid, times, peaks, checked, skipped, _work_codes(space, code[order]))


def _joined(arrays: list[np.ndarray], order: np.ndarray) -> np.ndarray:
    """Return the parts' arrays as one, in `order`; a value every part broadcasts (a fixed choice) stays a view."""
    value = arrays[0][:1]
    if all(a.strides == (0,) for a in arrays) and all(a[0] == value[0] for a in arrays):
        return np.broadcast_to(value, (len(order),))
    return np.concatenate(arrays)[order]


class _Thresholds:
    """What the candidates priced so far guarantee: the top-th row's time, the frontier, the near-fit cut."""

    def __init__(self, goal: Goal) -> None:
        self.goal = goal
        self.times, self.peaks = np.zeros(0), np.zeros(0)   # fitting candidates that may still matter
        self.near = np.zeros(0)                             # times of near-fitting pipelined ones that may
        self.cut, self.near_cut = np.inf, np.inf

    def prunes(self, t_lb: np.ndarray, m_lb: np.ndarray, pipelined: np.ndarray) -> np.ndarray:
        """Return which rows (bounds t_lb, m_lb) cannot change the answer: skip only strictly worse ones."""
        if self.goal.pareto:
            beaten = self._dominated(t_lb, m_lb)
        else:
            beaten = t_lb > self.cut
        beaten |= m_lb > self.goal.capacity
        near = (t_lb > self.near_cut) | (m_lb > self.goal.capacity * self.goal.near_fit)
        return beaten & (near | ~pipelined)

    def _dominated(self, t_lb: np.ndarray, m_lb: np.ndarray) -> np.ndarray:
        """Return which rows some priced fitting candidate beats: no more memory and strictly faster."""
        if not len(self.times):
            return np.zeros(len(t_lb), dtype=bool)
        at = np.searchsorted(self.peaks, m_lb, side="right") - 1   # self.peaks sorted, times a staircase
        return (at >= 0) & (self.times[np.maximum(at, 0)] < t_lb)

    def add(self, times: np.ndarray, peaks: np.ndarray, pipelined: np.ndarray) -> None:
        """Take in a chunk's prices and tighten the thresholds."""
        fit = peaks <= self.goal.capacity
        t, m = np.concatenate([self.times, times[fit]]), np.concatenate([self.peaks, peaks[fit]])
        if self.goal.pareto:
            order = np.lexsort((t, m))
            t, m = t[order], m[order]
            best = np.minimum.accumulate(t)
            keep = np.concatenate([[True], best[1:] < best[:-1]]) if len(t) else np.zeros(0, dtype=bool)
            self.times, self.peaks = best[keep], m[keep]
        else:
            order = np.lexsort((m, t))
            t, m = t[order], m[order]
            starts = np.flatnonzero(np.concatenate([[True], (t[1:] != t[:-1]) | (m[1:] != m[:-1])])) \
                if len(t) else np.zeros(0, dtype=np.int64)
            if len(starts) >= self.goal.top and t[starts[self.goal.top - 1]] == t[starts[self.goal.top - 1]]:
                self.cut = float(t[starts[self.goal.top - 1]])
                end = starts[self.goal.top] if len(starts) > self.goal.top else len(t)
                t, m = t[:end], m[:end]   # rows past the top-th cannot come back into the top
            self.times, self.peaks = t, m
        near = np.concatenate([self.near, times[pipelined & (peaks <= self.goal.capacity * self.goal.near_fit)]])
        if len(near) >= self.goal.near_tried:
            kth = float(np.partition(near, self.goal.near_tried - 1)[self.goal.near_tried - 1])
            if kth == kth:
                self.near_cut, near = kth, near[near <= kth]
        self.near = near
