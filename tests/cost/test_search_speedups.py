"""The search's fast paths against the obvious ones they replace (speed is in bench/, never here)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from hpdsl.cost.feasibility.shape import group_rows
from hpdsl.cost.price.pipeline_layout import build_layout
from hpdsl.cost.sweep.space import divisors


@given(st.integers(1, 5000))
def test_divisors_are_every_divisor_in_order(n: int) -> None:
    assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


@given(st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=4), min_size=1, max_size=60),
       st.booleans())
def test_group_rows_equals_np_unique(rows: list[list[int]], wide: bool) -> None:
    width = min(len(r) for r in rows)
    table = np.array([r[:width] for r in rows], dtype=np.int64) * (10**7 if wide else 1)
    distinct, inverse = group_rows(list(table.T), len(table))
    assert [distinct[i] for i in inverse] == [tuple(int(v) for v in row) for row in table]
    assert len(set(distinct)) == len(distinct) == len(np.unique(table, axis=0))


def _slow_cum(body: list[int], n_columns: int, sizes: tuple[int, ...]) -> np.ndarray:
    cum = np.zeros((len(sizes), max(sizes) + 1, n_columns))
    start = 0
    for c, size in enumerate(sizes):
        for j, column in enumerate(body[start:start + size]):
            cum[c, j + 1:, column] += 1
        start += size
    return cum


@given(st.lists(st.integers(0, 3), min_size=1, max_size=40), st.integers(1, 4), st.integers(1, 2))
def test_build_layout_from_runs_equals_the_per_layer_loop(body: list[int], stages: int, vpp: int) -> None:
    if stages * vpp > len(body):
        return
    runs = [(column, len(list(run))) for column, run in itertools.groupby(body)]
    layout = build_layout(runs, [], 6, 4, 5, stages=stages, vpp=vpp)
    sizes = tuple(int(s) for s in layout.chunk_layers)
    limits = np.minimum(np.arange(max(sizes) + 1)[None, :], layout.chunk_layers[:, None])
    assert np.array_equal(layout.first_layers(limits), _slow_cum(body, 6, sizes))
    assert np.array_equal(layout.comp[:, :4], _slow_cum(body, 6, sizes)[:, -1, :4])
    assert np.array_equal(layout.comp[:, :4].sum(axis=0), np.bincount(body, minlength=4)[:4])
