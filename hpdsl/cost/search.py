"""A bound model and a device count into the fastest strategies that fit, priced as numpy arrays.

The search enumerates every factorisation N = dp·tp·pp·cp with the expert
degrees ep·etp dividing dp·cp·tp (Megatron's expert mesh), crossed with the
micro-batch sizes, recompute choices, optimizer sharding levels, context-parallel
kinds and virtual stages asked for. The enumeration is a product of small index
arrays; validity is the vectorised rule set of hpdsl.cost.validate; pricing is
hpdsl.cost.pricing over chunks of the grid. Python loops run over divisors and
chunks, never over candidates.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from functools import cache
from typing import Any

import attrs
import numpy as np

from hpdsl.bound.bind import CostModel
from hpdsl.cost import rank
from hpdsl.cost.devices import get_device
from hpdsl.cost.estimate import Estimate, estimate
from hpdsl.cost.layout import even_split
from hpdsl.cost.pricing import Prepared, prepare, price_fit
from hpdsl.cost.strategy import CP_KINDS, RECOMPUTE, ZERO, InvalidStrategyError, Strategy, StrategyGrid
from hpdsl.cost.bounds import MAX_CANDIDATES
from hpdsl.cost.prune import Goal, Pruned, bounded_search, row_count, too_many
from hpdsl.cost.validate import invalid_mask, model_shape

CHUNK = 1 << 13
"""Candidates priced per numpy pass: big enough to amortise numpy's call overhead, small enough for cache."""


PROGRESS_AFTER = 1.0
"""Seconds a search runs before its progress bar shows."""


@attrs.frozen
class SearchResult:
    """The ranked strategies that fit, and what the sweep did."""

    model: str
    devices: int
    memory_bytes: int
    enumerated: int
    valid: int
    fitting: int
    seconds: float
    top: tuple[Estimate, ...]
    stands_for: tuple[int, ...] = ()   # per row: equivalent strategies it represents (hpdsl/cost/rank.py)
    pareto: bool = False               # the rows are the memory/step-time frontier, not the fastest
    skipped: int = 0                   # of `enumerated`: neither checked nor priced, their bounds could not win

    def to_json(self) -> dict[str, object]:
        """Return the result as `hpdsl search --json` prints it (the parameters once, not per entry)."""
        top = [{k: v for k, v in e.to_json().items() if k not in ("params", "model", "machine")} for e in self.top]
        for row, count in zip(top, self.stands_for):
            row["stands_for"] = count
        params = self.top[0].params.to_json() if self.top else None
        machine = self.top[0].to_json()["machine"] if self.top else None
        return {"model": self.model, "devices": self.devices, "memory_bytes": self.memory_bytes, "machine": machine,
                "enumerated": self.enumerated, "skipped": self.skipped, "valid": self.valid, "fitting": self.fitting,
                "seconds": self.seconds, "pareto": self.pareto, "params": params, "top": top}


def divisors(n: int) -> list[int]:
    """Return the divisors of n in increasing order."""
    return list(_divisors(n))


@cache
def _divisors(n: int) -> tuple[int, ...]:
    # Memoised: `layouts` asks for the divisors of the same few numbers thousands of times.
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0] if n > 0 else []
    return tuple(small + [n // d for d in reversed(small) if d * d != n])


def layouts(devices: int, experts: int, *, tp_of: int = 0, etp_of: int = 0, cp_of: int = 0,
            dp_of: int = 0, pp_max: int = 0) -> np.ndarray:
    """Return (L, 6) rows tp, cp, pp, dp, ep, etp with dp·tp·pp·cp = devices, ep·etp | dp·cp·tp.

    `tp_of`, `etp_of`, `cp_of` and `dp_of`, when not 0, are numbers every tp (etp,
    cp, dp) must divide, and `pp_max` the most pipeline stages (a stage holds at
    least one layer): the rules refuse the others anyway (the model's widths; the
    sequence split over cp; the global batch split over dp), and leaving them out
    early keeps a device count with many divisors (720,720) or a large power of two
    (131,072) from enumerating millions of rows.
    """
    blocks: list[np.ndarray] = []
    for tp in _divisors(devices):
        if tp_of and tp_of % tp:
            continue
        for cp in _divisors(devices // tp):
            if cp_of and cp_of % cp:
                continue
            for pp in _divisors(devices // (tp * cp)):
                if pp_max and pp > pp_max:
                    break
                dp = devices // (tp * cp * pp)
                if dp_of and dp_of % dp:
                    continue
                experts_of = _expert_layouts(dp * cp * tp, experts, etp_of)
                block = np.empty((len(experts_of), 6), dtype=np.int64)
                block[:, :4], block[:, 4:] = (tp, cp, pp, dp), experts_of
                blocks.append(block)
    return np.concatenate(blocks) if blocks else np.zeros((0, 6), dtype=np.int64)


@cache
def _expert_layouts(mesh: int, experts: int, etp_of: int) -> np.ndarray:
    """Return the (ep, etp) pairs of a mesh of `mesh` devices: ep·etp | mesh, ep | experts, etp | etp_of."""
    if experts <= 1:
        return np.ones((1, 2), dtype=np.int64)
    pairs = [(ep, etp) for ep in _divisors(mesh) if experts % ep == 0
             for etp in _divisors(mesh // ep) if not etp_of or etp_of % etp == 0]
    out = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    out.setflags(write=False)  # cached: shared by every call
    return out


@attrs.frozen(eq=False)
class Space:
    """What a search chooses from: the model's layouts and each list's values, candidates as index tuples.

    A candidate is (vpp, layout, micro-batch, recompute, zero, cp kind) indices into
    `options`, the enumeration order is that tuple's (cp kind fastest), and `grid`
    builds the strategies of any index arrays, so a search can materialise a part of
    the product (hpdsl/cost/prune.py) and order it as the whole one would be.
    """

    rows: np.ndarray                      # (L, 6) tp, cp, pp, dp, ep, etp, sorted by pp
    options: tuple[np.ndarray, ...]       # vpp values, layout indices, micro-batches, recompute, zero, cp kind codes
    base: Strategy
    devices: int
    global_batch: int
    seq_len: int

    @property
    def sizes(self) -> tuple[int, ...]:
        """Return how many values each of the six choices has."""
        return tuple(len(o) for o in self.options)

    def grid(self, vi: np.ndarray, ri: np.ndarray, mi: np.ndarray, ci: np.ndarray, zi: np.ndarray,
             ki: np.ndarray) -> StrategyGrid:
        """Return the candidates at the given indices (vpp, layout, micro-batch, recompute, zero, cp kind)."""
        lay, (vp, _, mb, rc, zr, ck) = self.rows[ri], self.options
        n = len(lay)
        template = StrategyGrid.from_strategies([self.base])
        arrays = {name: np.broadcast_to(value, (n,)) for name, value in template.arrays.items()}
        arrays.update(tp=lay[:, 0], cp=lay[:, 1], pp=lay[:, 2], dp=lay[:, 3], ep=lay[:, 4], etp=lay[:, 5],
                      micro_batch=mb[mi], recompute=rc[ci], zero=zr[zi], cp_kind=ck[ki], vpp=vp[vi],
                      sp=(lay[:, 0] > 1).astype(np.int64),
                      global_batch=np.broadcast_to(self.global_batch, (n,)),
                      seq_len=np.broadcast_to(self.seq_len, (n,)), num_devices=np.broadcast_to(self.devices, (n,)),
                      split_id=np.broadcast_to(0, (n,)), recompute_layers=np.broadcast_to(0, (n,)))
        return StrategyGrid({k: np.asarray(v, dtype=np.float64 if k == "mfu" else np.int64)
                             for k, v in arrays.items()}, template.splits, template.devices)

    def kept(self, ri: np.ndarray, ki: np.ndarray) -> np.ndarray:
        """Return which candidates the search keeps: the cp kind only varies where cp > 1."""
        return (self.rows[ri, 1] > 1) | (self.options[5][ki] == CP_KINDS.index(self.base.cp_kind))


def search_space(prepared: Prepared, devices: int, *, global_batch: int, seq_len: int,
                 micro_batches: Sequence[int] = (1, 2, 4, 8), recompute: Sequence[str] = RECOMPUTE,
                 zero: Sequence[str] = ZERO, cp_kinds: Sequence[str] = CP_KINDS, vpp: Sequence[int] = (1,),
                 base: Strategy = Strategy()) -> Space:
    """Return the choices a search for `devices` makes, the layouts the model allows among them."""
    rows = _model_layouts(prepared, devices, global_batch=global_batch, seq_len=seq_len)
    rows = rows[np.argsort(rows[:, 2], kind="stable")]   # by pp, so a chunk holds few layouts
    options = (np.asarray(vpp, dtype=np.int64), np.arange(len(rows)), np.asarray(micro_batches, dtype=np.int64),
               np.asarray([RECOMPUTE.index(r) for r in recompute], dtype=np.int64),
               np.asarray([ZERO.index(z) for z in zero], dtype=np.int64),
               np.asarray([CP_KINDS.index(k) for k in cp_kinds], dtype=np.int64))
    return Space(rows, options, base, devices, global_batch, seq_len)


def enumerate_grid(prepared: Prepared, devices: int, *, global_batch: int, seq_len: int,
                   micro_batches: Sequence[int] = (1, 2, 4, 8),
                   recompute: Sequence[str] = RECOMPUTE, zero: Sequence[str] = ZERO,
                   cp_kinds: Sequence[str] = CP_KINDS, vpp: Sequence[int] = (1,),
                   base: Strategy = Strategy()) -> StrategyGrid:
    """Return every candidate (valid or not) for `devices` as a grid, grouped by pipeline layout."""
    space = search_space(prepared, devices, global_batch=global_batch, seq_len=seq_len,
                         micro_batches=micro_batches, recompute=recompute, zero=zero, cp_kinds=cp_kinds,
                         vpp=vpp, base=base)
    return full_grid(space)


def full_grid(space: Space) -> StrategyGrid:
    """Return the whole product of a space's choices, in enumeration order (refused past MAX_CANDIDATES)."""
    sizes = space.sizes
    if math.prod(sizes) > MAX_CANDIDATES:
        raise too_many(math.prod(sizes))
    # vpp outermost, then layouts: grouped by (vpp, pp). Each option's column of the
    # product is its index repeated (the options inside it) and tiled (those outside).
    index = [np.tile(np.repeat(np.arange(size), math.prod(sizes[k + 1:])), math.prod(sizes[:k]))
             for k, size in enumerate(sizes)]
    keep = space.kept(index[1], index[5])
    return space.grid(*(i[keep] for i in index))


def _model_layouts(prepared: Prepared, devices: int, *, global_batch: int = 0, seq_len: int = 0) -> np.ndarray:
    """Return the layouts the model's rules allow whatever the other choices (heads, experts, widths).

    A dp that does not divide the global batch, a cp that does not divide the
    sequence, or more pipeline stages than layers is refused whatever the
    micro-batch, cp kind or vpp (hpdsl/cost/validate.py).
    """
    experts = max(c.experts for c in prepared.columns.configs)
    shape = model_shape(prepared.columns)
    tp_of = math.gcd(*(count for _, count in (*shape.heads, *shape.tp_widths)))
    rows = layouts(devices, experts, tp_of=tp_of, etp_of=math.gcd(*shape.expert_widths),
                   cp_of=max(seq_len, 0), dp_of=max(global_batch, 0), pp_max=shape.layers)
    probe = StrategyGrid.from_arrays(len(rows), **dict(zip(("tp", "cp", "pp", "dp", "ep", "etp"), rows.T)),
                                     sp=(rows[:, 0] > 1).astype(np.int64))
    return rows[~invalid_mask(prepared.columns, probe, model_only=True)]


def search(cost_model: CostModel | Prepared, devices: int, memory_bytes: float | None = None, *,
           device: str = "h100", top: int = 10, global_batch: int = 1024, seq_len: int = 4096,
           micro_batches: Sequence[int] = (1, 2, 4, 8), recompute: Sequence[str] = RECOMPUTE,
           zero: Sequence[str] = ZERO, cp_kinds: Sequence[str] = CP_KINDS,
           vpp: Sequence[int] = (1,), base: Strategy | None = None,
           progress: bool | None = None, precision: str | None = None, optimizer: str | None = None,
           impl: str | None = None, softmax_bytes: int | None = None, pareto: bool = False,
           mfu: float | None = None, _exhaustive: bool = False) -> SearchResult:
    """Return the `top` fastest valid strategies for `devices` that fit `memory_bytes` each (or the frontier).

    Candidates whose lower bounds cannot beat the answer are skipped unpriced
    (hpdsl/cost/prune.py); `_exhaustive` prices every one instead (the tests hold both equal).
    """
    start = time.perf_counter()
    base = (base or Strategy()).with_(device=device)
    if mfu is not None:  # 0: the device time model (hpdsl/cost/time/)
        base = base.with_(mfu=mfu)
    base = base.with_(precision=precision or base.precision, optimizer=optimizer or base.optimizer,
                      impl=impl or base.impl,
                      softmax_bytes=base.softmax_bytes if softmax_bytes is None else softmax_bytes)
    rank.require_search_inputs(rank.search_input_reasons(
        devices, memory_bytes, top, micro_batches=micro_batches, vpp=vpp, global_batch=global_batch,
        seq_len=seq_len, precision=base.precision, optimizer=base.optimizer, impl=base.impl,
        softmax_bytes=base.softmax_bytes))
    prepared = cost_model if isinstance(cost_model, Prepared) else prepare(cost_model)
    capacity = int(memory_bytes) if memory_bytes is not None else get_device(device).memory_bytes
    space = search_space(prepared, devices, global_batch=global_batch, seq_len=seq_len,
                         micro_batches=micro_batches, recompute=recompute, zero=zero,
                         cp_kinds=cp_kinds, vpp=vpp, base=base)
    if _exhaustive:
        grid = full_grid(space)
        # The layouts passed the families' requires in _model_layouts: the rest of the rules judge the grid.
        valid = rank.canonical_zero(grid.take(~invalid_mask(prepared.columns, grid, requires=False)))
        times, peaks = _price_chunks(prepared, valid, progress, start)
        considered, skipped = len(grid), 0
    else:
        goal = Goal(top, pareto, capacity, NEAR_FIT, UNEVEN_TRIED)
        found = _bounded(prepared, space, goal, progress, start)
        valid, times, peaks = found.grid, found.times, found.peaks
        considered, skipped = found.checked + found.skipped, found.skipped
    extra, extra_times, extra_peaks = uneven_candidates(prepared, valid, times, peaks, capacity)
    times, peaks = np.concatenate([times, extra_times]), np.concatenate([peaks, extra_peaks])
    fits = np.nonzero(peaks <= capacity)[0]
    ranked, counts = (rank.pareto if pareto else rank.collapse)(times, peaks, fits)
    best = tuple(estimate(prepared, valid.strategy(i) if i < len(valid) or extra is None
                          else extra.strategy(i - len(valid)))
                 for i in ranked[:top].tolist())
    return SearchResult(prepared.columns.cost_model.model.name, devices, capacity,
                        considered + len(extra_times), len(times), len(fits), time.perf_counter() - start, best,
                        tuple(int(c) for c in counts[:top]), pareto, skipped)


def _bounded(prepared: Prepared, space: Space, goal: Goal, progress: bool | None, start: float) -> Pruned:
    """Return the bounded search's priced candidates, with the progress bar of _price_chunks."""
    total = row_count(space) * space.sizes[3] * space.sizes[4]
    show = (sys.stderr.isatty() if progress is None else progress) and total > CHUNK
    bar = _progress_bar(total, max(0.0, PROGRESS_AFTER - (time.perf_counter() - start))) if show else None
    try:
        return bounded_search(prepared, space, goal, MAX_CANDIDATES, None if bar is None else bar.update)
    finally:
        if bar is not None:
            bar.close()


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
                      capacity: float) -> tuple[StrategyGrid | None, np.ndarray, np.ndarray]:
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
    extra = extra.take(~invalid_mask(prepared.columns, extra, requires=False))
    return (extra, *price_fit(prepared, extra))


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


def _price_chunks(prepared: Prepared, grid: StrategyGrid, progress: bool | None,
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
