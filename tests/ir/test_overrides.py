"""`--set` overrides: a new layer count or first_k_dense re-cuts the stack as the profile derives it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpdsl import compile_paths, compile_sources
from hpdsl.diagnostics import Source
from hpdsl.ir.nodes import ModelIR
from hpdsl.ir.overrides import apply_sets
from hpdsl.ir.stack import layer_kinds

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def deepseek() -> ModelIR:
    return compile_paths([EXAMPLES / "deepseek_v3.hpf"]).models["deepseek_v3"]


def _body(model: ModelIR) -> list[str]:
    return layer_kinds(g for g in model.groups if not g.mtp)


@pytest.mark.parametrize(("sets", "dense", "moe"), [
    ({"layers": 4, "first_k_dense": 1}, 1, 3),
    ({"layers": 4}, 3, 1),
    ({"first_k_dense": 1}, 1, 60),
    ({"first_k_dense": 5}, 5, 56),
    ({"layers": 6, "first_k_dense": 0}, 0, 6),
    ({"layers": 2, "first_k_dense": 3}, 2, 0),
])
def test_first_k_dense_moves_the_dense_moe_boundary(deepseek: ModelIR, sets: dict, dense: int, moe: int) -> None:
    small = apply_sets(deepseek, sets)
    assert _body(small) == ["dense"] * dense + ["moe"] * moe
    assert [g.kind for g in small.groups if g.mtp] == ["moe"]  # the MTP layer stays
    assert small.first_k_dense == sets.get("first_k_dense", min(3, sets.get("layers", 61)))


@settings(max_examples=40, deadline=None)
@given(layers=st.integers(1, 80), first_k_dense=st.integers(0, 90))
def test_the_stack_is_what_the_profile_derives_for_the_new_fields(deepseek: ModelIR, layers: int,
                                                                   first_k_dense: int) -> None:
    source = (EXAMPLES / "deepseek_v3.hpf").read_text(encoding="utf-8")
    source = source.replace("layers 61", f"layers {layers}").replace("first_k_dense 3", f"first_k_dense {first_k_dense}")
    derived = compile_sources([Source("deepseek_v3.hpf", source)]).models["deepseek_v3"]
    overridden = apply_sets(deepseek, {"layers": layers, "first_k_dense": first_k_dense})
    # The body as the profile derives it; the MTP layer keeps the full model's kind (a scaled run's
    # body may end on another kind than the real model's last layer).
    assert _body(overridden) == _body(derived)
    assert [g for g in overridden.groups if g.mtp] == [g for g in deepseek.groups if g.mtp]
