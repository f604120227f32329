"""Layout IR: lowering, dims text and values, the split rule, per-variant tables."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from property.ast_strategies import dim_exprs

from hpdsl import ast
from hpdsl.fmt import format_dim
from hpdsl.ir.layouts import (
    covers, declared_params, dim_from_ast, dim_names, evaluate_dim, layout_for, render_dim, split_problem, whole,
)
from hpdsl.ir.lower_families import lower_family
from hpdsl.syntax import parse_text

FAMILY = """
family f {
  factory "pkg.mod:F"
  selector gating: enum(gated, plain) = gated
  variant gated "pkg.mod:G" default when gating == gated params(gate_proj, up_proj, down_proj.weight)
  variant plain "pkg.mod:P" when gating == plain params(up_proj, down_proj.weight, down_proj.weight)
  layout {
    gate_proj.weight (ffn_width, hidden)                   colwise
    up_proj.weight   ((1 + gated) * ffn_width / 2, hidden) colwise by ffn_width
    down_proj.weight (hidden, ffn_width)                   rowwise for plain
    down_proj.weight (hidden, ffn_width)                   replicate for gated
    e                (experts / ep, hidden, 2 * ffn_width) colwise(2)
  }
}
"""


def dim(text: str) -> ast.DimExpr:
    """Parse one dims expression (the first dim of a layout entry)."""
    family = parse_text(f'family f {{ layout {{ p ({text}) replicate }} }}').items[0]
    assert isinstance(family, ast.Family) and isinstance(family.items[0], ast.Layout)
    return family.items[0].entries[0].dims[0]


def test_lowering_fills_split_dims_and_resolves_variants() -> None:
    family = lower_family(parse_text(FAMILY).items[0])  # type: ignore[arg-type]
    assert [v.params for v in family.variants] == [("gate_proj", "up_proj", "down_proj.weight"),
                                                   ("up_proj", "down_proj.weight")]
    rows = [(e.path, e.placement, e.dim, e.variants, None if e.unit is None else e.unit.text)
            for e in family.layout or ()]
    assert rows == [
        ("gate_proj.weight", "colwise", 0, ("gated",), None),
        ("up_proj.weight", "colwise", 0, ("gated", "plain"), "ffn_width"),
        ("down_proj.weight", "rowwise", 1, ("plain",), None),
        ("down_proj.weight", "replicate", None, ("gated",), None),
        ("e", "colwise", 2, (), None),  # declared by no variant: the check reports it
    ]
    assert [d.text for d in (family.layout or ())[1].dims] == ["(1 + gated) * ffn_width / 2", "hidden"]
    assert set(layout_for(family, "gated")) == {"gate_proj.weight", "up_proj.weight", "down_proj.weight"}
    assert layout_for(family, "plain")["down_proj.weight"].placement == "rowwise"
    assert declared_params(family, "plain") == ("up_proj", "down_proj.weight")


def test_a_family_without_a_layout_block_has_none() -> None:
    bare = lower_family(parse_text('family f { factory "p.m:F"  variant v "p.m:V" default }').items[0])  # type: ignore[arg-type]
    empty = lower_family(parse_text('family f { factory "p.m:F"  layout {} }').items[0])  # type: ignore[arg-type]
    assert bare.layout is None and empty.layout == ()


def test_dims_evaluate_exactly_and_unknown_names_stay_unknown() -> None:
    expr = dim_from_ast(dim("(1 + output_gate) * heads * head_dim / 2 + 3"))
    assert evaluate_dim(expr, {"output_gate": 1, "heads": 4, "head_dim": 8}) == 35
    assert evaluate_dim(expr, {"output_gate": 0, "heads": 3, "head_dim": 3}) == Fraction(15, 2)
    assert whole(Fraction(15, 2)) is None and whole(Fraction(4)) == 4 and whole(None) is None
    assert evaluate_dim(expr, {"heads": 4}) is None
    assert evaluate_dim(dim_from_ast(dim("a / b")), {"a": 4, "b": 0}) is None
    assert dim_names(expr) == {"output_gate", "heads", "head_dim"}


@given(dim_exprs)
def test_the_ir_text_of_a_dims_expression_is_its_canonical_form(expr: ast.DimExpr) -> None:
    assert render_dim(dim_from_ast(expr)) == format_dim(expr)
    assert dim_from_ast(expr).text == format_dim(expr)


@pytest.mark.parametrize(("size", "tp", "unit", "problem"), [
    (64, 8, None, None),
    (100, 8, None, "100 is not a multiple of tp=8"),
    (64, 4, 4, None),
    (64, 8, 4, "its 4 blocks do not split evenly over tp=8"),
    (64, 2, 3, "64 is not a whole number of 3 blocks"),
])
def test_the_split_rule(size: int, tp: int, unit: int | None, problem: str | None) -> None:
    assert split_problem(size, tp, unit) == problem


def test_a_declared_path_covers_itself_and_what_is_under_it() -> None:
    assert covers("q_proj", "q_proj.weight") and covers("q_proj.weight", "q_proj.weight")
    assert not covers("q_proj", "q_proj_extra.weight") and not covers("q_proj.weight", "q_proj")
