"""Uneven pipeline splits in the search: a lighter first or last stage where it helps."""

from __future__ import annotations

from cost_builders import example
from hypothesis import given
from hypothesis import strategies as st

from hpdsl.cost.estimate import estimate
from hpdsl.cost.price.pipeline_layout import even_split
from hpdsl.cost.search import search
from hpdsl.cost.sweep.uneven import uneven_splits

GIB = 1024**3


@given(st.integers(1, 200), st.integers(2, 32))
def test_uneven_splits_move_one_or_two_layers_off_an_end(layers: int, stages: int) -> None:
    base = even_split(layers, stages)
    for split in uneven_splits(layers, stages):
        assert sum(split) == layers and len(split) == stages and min(split) >= 1
        assert split != base
        assert split[0] < base[0] or split[-1] < base[-1]
        assert max(base[0] - split[0], base[-1] - split[-1]) <= 2


def test_uneven_splits_of_32_layers_over_two_stages() -> None:
    assert uneven_splits(32, 2) == ((15, 17), (17, 15), (14, 18), (18, 14))


def test_a_lighter_last_stage_fits_where_the_even_split_does_not() -> None:
    model = example("llama3_8b")
    result = search(model, 64, 20 * GIB, top=3, progress=False)
    best = result.top[0]
    assert best.strategy.pp_split == (17, 15)
    row = result.to_json()["top"]
    assert isinstance(row, list) and tuple(row[0]["strategy"]["pp_split"]) == (17, 15)
    even = estimate(model, best.strategy.with_(pp_split=None))
    assert not even.memory.fits or even.step_time_s > best.step_time_s
    assert best.memory.fits


def test_a_heavy_output_stage_gets_fewer_layers_when_that_is_faster() -> None:
    model = example("deepseek_v3")
    best = search(model, 1024, top=1, progress=False).top[0]
    assert best.strategy.pp_split is not None and best.strategy.pp_split[-1] < best.strategy.pp_split[1]
    even = estimate(model, best.strategy.with_(pp_split=None))
    assert best.step_time_s < even.step_time_s
