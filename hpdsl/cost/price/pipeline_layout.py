"""A pipeline layout (pp, vpp, split) into per-chunk and per-rank column counts, and in-flight weights.

The body's layers are cut into pp·vpp chunks in model order; chunk c runs on
rank c mod pp (Megatron's interleaving). The embedding is on the first chunk;
the final norm, output layer, loss and MTP layers on the last. An even split
gives the layers that do not divide evenly to the middle chunks first, then to
the last chunk, then to the first, because the ends already carry the
embedding and the output layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

import attrs
import numpy as np

from hpdsl.cost.formulas import xp


@attrs.frozen
class Plan:
    """A layout's non-zero counts as Python lists: (column, count) per chunk and per rank, totals per column."""

    chunk_held: tuple[tuple[tuple[int, float], ...], ...]
    rank_held: tuple[tuple[tuple[int, float], ...], ...]
    totals: tuple[float, ...]
    chunk_layers: tuple[int, ...]
    rank_layers: tuple[int, ...]


Runs = Sequence[tuple[int, int]]
"""A body (or the MTP layers) as (column, layers) per run, in model order."""


@attrs.frozen(eq=False)
class BodyCounts:
    """How many body layers of each column come before any position: run-length, never per layer."""

    run_ends: np.ndarray       # (R,) layers up to the end of each run
    run_columns: np.ndarray    # (R,) each run's column
    prefix: np.ndarray         # (R + 1, J) layers of each column in the runs before run r

    def before(self, position: np.ndarray) -> np.ndarray:
        """Return (..., J): the body layers of each column before `position` (an int array of positions)."""
        flat = np.asarray(position, dtype=np.int64).ravel()
        runs = np.searchsorted(self.run_ends, flat, side="right")  # the runs wholly before each position
        out = self.prefix[runs]
        inside = runs < len(self.run_ends)
        if np.any(inside):
            starts = np.concatenate([[0], self.run_ends])[runs[inside]]
            out[np.flatnonzero(inside), self.run_columns[runs[inside]]] += flat[inside] - starts
        return out.reshape(*np.shape(position), self.prefix.shape[1])


def body_counts(body: Runs, n_columns: int) -> BodyCounts:
    """Return the prefix counts of a run-length body."""
    columns = np.array([column for column, _ in body], dtype=np.int64)
    counts = np.array([count for _, count in body], dtype=np.int64)
    steps = np.zeros((len(body) + 1, n_columns))
    steps[np.arange(1, len(body) + 1), columns] = counts
    return BodyCounts(np.cumsum(counts), columns, np.cumsum(steps, axis=0))


@attrs.define(eq=False, frozen=True, slots=False)
class Layout:
    """Counts per chunk and rank of every pricing column (body kinds, MTP kinds, embedding, output)."""

    stages: int
    vpp: int
    chunk_layers: np.ndarray   # (C,) body layers per chunk
    comp: np.ndarray           # (C, J) layers (or 1 for the embedding/output) of each column per chunk
    rank_comp: np.ndarray      # (S, J) the same per rank
    starts: np.ndarray         # (C,) body layers before each chunk
    body: BodyCounts
    memo: dict[str, Any] = attrs.field(factory=dict)  # what the grid evaluator derives from the layout alone

    def first_layers(self, limit: np.ndarray) -> np.ndarray:
        """Return (C, k, J): each column's layers among the first limit[c, i] of chunk c (limit at most its size)."""
        return self.body.before(self.starts[:, None] + limit) - self.body.before(self.starts)[:, None, :]

    @cached_property
    def chunk_spans(self) -> tuple[slice | np.ndarray | None, ...]:
        """Return, per column, the chunks that hold it (a slice when contiguous, None if none)."""
        return tuple(span(self.comp[:, j] > 0) for j in range(self.comp.shape[1]))

    @cached_property
    def rank_spans(self) -> tuple[slice | np.ndarray | None, ...]:
        """Return, per column, the ranks that hold it."""
        return tuple(span(self.rank_comp[:, j] > 0) for j in range(self.rank_comp.shape[1]))

    @cached_property
    def plan(self) -> Plan:
        """Return the counts as Python lists, for pricing one strategy without numpy (hpdsl/cost/price/scalar.py)."""
        def held(counts: np.ndarray) -> tuple[tuple[tuple[int, float], ...], ...]:
            return tuple(tuple((j, float(n)) for j, n in enumerate(row) if n) for row in counts.tolist())
        return Plan(held(self.comp), held(self.rank_comp), tuple(self.comp.sum(axis=0).tolist()),
                    tuple(int(n) for n in self.chunk_layers), tuple(int(n) for n in self.rank_layers()))

    @property
    def chunks(self) -> int:
        """Return pp·vpp."""
        return self.stages * self.vpp

    def rank_layers(self) -> np.ndarray:
        """Return the body layers of each rank."""
        return self.chunk_layers.reshape(self.vpp, self.stages).sum(axis=0)


def span(column: np.ndarray) -> slice | np.ndarray | None:
    """Return where a boolean column is set: a slice when contiguous, None when nowhere."""
    where = np.flatnonzero(column)
    if not len(where):
        return None
    if where[-1] - where[0] + 1 == len(where):
        return slice(int(where[0]), int(where[-1]) + 1)
    return where


def even_split(layers: int, chunks: int) -> tuple[int, ...]:
    """Return `layers` cut into `chunks` as evenly as possible, the extras to the middle chunks first."""
    base, extra = divmod(layers, chunks)
    counts = [base] * chunks
    order = [*range(1, chunks - 1), chunks - 1, 0] if chunks > 1 else [0]
    for c in order[:extra]:
        counts[c] += 1
    return tuple(counts)


def build_layout(body: Runs, mtp: Runs, n_columns: int, embedding: int, output: int, *,
                 stages: int, vpp: int = 1, split: Sequence[int] | None = None) -> Layout:
    """Return the layout of a run-length body over stages·vpp chunks (linear in runs and chunks, not layers)."""
    chunks = stages * vpp
    layers = sum(count for _, count in body)
    sizes = np.asarray(tuple(split) if split is not None else even_split(layers, chunks), dtype=np.int64)
    counts = body_counts(body, n_columns)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    comp = counts.before(ends) - counts.before(starts)
    comp[0, embedding] += 1
    comp[-1, output] += 1
    for column, count in mtp:
        comp[-1, column] += count
    rank_comp = comp.reshape(vpp, stages, n_columns).sum(axis=0)
    return Layout(stages, vpp, sizes, comp, rank_comp, starts, counts)


def in_flight(stages: int, vpp: int, micro_batches: np.ndarray | float) -> np.ndarray:
    """Return (C, n): micro-batches whose activations chunk c holds at its rank's peak (1F1B).

    Without interleaving rank i holds min(pp - i, m) micro-batches. With v chunks
    per rank the warm-up runs 2·(pp - i - 1) + (v - 1)·pp forward chunks before
    the first backward; the first pp of them are chunk 0 of pp micro-batches, the
    next pp chunk 1, and so on (at most m·v in all). For an even split this gives
    Megatron's factor 1 + (pp - 1)/(pp·v) on the first rank.
    """
    m = np.asarray(micro_batches, dtype=np.float64)[None, :]
    ranks = np.arange(stages)[:, None]
    return np.concatenate([in_flight_at(stages, vpp, ranks, position, m) for position in range(vpp)], axis=0)


def in_flight_at(stages: int, vpp: int, rank: Any, position: int, m: Any) -> Any:
    """Return the micro-batches chunk `position` of `rank` holds at its peak (arrays or floats), as in_flight."""
    if vpp == 1:
        return xp.minimum(stages - rank, m)
    count = xp.minimum(2 * (stages - rank - 1) + (vpp - 1) * stages + 1, m * vpp)
    first = xp.clip(count - position * stages, 0, stages)
    again = xp.clip(count - (position + vpp) * stages, 0, stages)
    return first + again
