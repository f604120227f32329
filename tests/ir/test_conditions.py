"""Condition IR: lowering from the AST, canonical text, evaluation, selection semantics."""

from __future__ import annotations

import attrs
import pytest

from hpdsl import ast
from hpdsl.errors import ResolutionError
from hpdsl.ir.conditions import (
    condition_from_ast,
    evaluate,
    matching_variants,
    names_in,
    new_condition,
    render_condition,
    violated_requires,
)
from hpdsl.ir.nodes import Condition, RequireIR, VariantIR
from hpdsl.syntax import parse_text


def parse_condition(text: str) -> ast.Expr:
    """Return the AST of one condition, parsed by the real grammar inside a require."""
    family = parse_text(f"family f {{ require {text} }}").items[0]
    assert isinstance(family, ast.Family)
    require = family.items[0]
    assert isinstance(require, ast.Require)
    return require.condition


def lower(text: str) -> Condition:
    return condition_from_ast(parse_condition(text))


# --------------------------------------------------------------------------
# AST -> IR
# --------------------------------------------------------------------------


def test_lowers_every_node_kind() -> None:
    c = lower("not a -> (tp >= 2 or backend == eager) and ep in (1, 2) and true")
    assert c.op == "implies"
    premise, conclusion = c.operands
    assert premise == Condition("not", operands=(Condition("ref", name="a"),))
    assert conclusion.op == "and"
    either, member, const = conclusion.operands
    assert either == Condition("or", operands=(Condition("cmp", name="tp", cmp=">=", value=2),
                                               Condition("cmp", name="backend", cmp="==",
                                                         value="eager")))
    assert member == Condition("in", name="ep", values=(1, 2))
    assert const == Condition("const", value=True)


def test_keeps_bools_apart_from_ints() -> None:
    c = lower("flag == true")
    assert c.value is True and isinstance(c.value, bool)


def test_fills_canonical_text_at_the_root() -> None:
    c = lower("  use_fused_mxfp8->use_mxfp8 ")
    assert c.text == "use_fused_mxfp8 -> use_mxfp8"


@pytest.mark.parametrize(("source", "canonical"), [
    ("a", "a"),
    ("(a)", "a"),
    ("a and b or c", "a and b or c"),
    ("a and (b or c)", "a and (b or c)"),
    ("(a and b) and c", "(a and b) and c"),
    ("a or (b or c)", "a or (b or c)"),
    ("not (a and b)", "not (a and b)"),
    ("not not a", "not not a"),
    ("(a -> b) -> c", "(a -> b) -> c"),
    ("a -> (b -> c)", "a -> (b -> c)"),
    ("a -> b or c", "a -> b or c"),
    ("not (a -> b)", "not (a -> b)"),
    ("tp==1", "tp == 1"),
    ("ep in (1,2,)", "ep in (1, 2)"),
    ("x != -3", "x != -3"),
    ("mode == \"eager\"", "mode == eager"),
    ("mode == \"two words\"", "mode == \"two words\""),
    ("flag != false", "flag != false"),
    ("false", "false"),
    ("r <= 1.5", "r <= 1.5"),
])
def test_renders_canonical_text(source: str, canonical: str) -> None:
    assert lower(source).text == canonical


@pytest.mark.parametrize("source", [
    "a and (b or c) -> not d", "(a -> b) -> (c -> d)", "not (x == 1 or y in (a, b))",
    "((a))", "a or b and c or d", "mode == \"a b\" and n > -1",
])
def test_canonical_text_parses_back_to_the_same_condition(source: str) -> None:
    c = lower(source)
    again = lower(c.text)
    assert again == c
    assert render_condition(again) == c.text


# --------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "env", "expected"), [
    ("a", {"a": True}, True),
    ("not a", {"a": True}, False),
    ("a and b", {"a": True, "b": False}, False),
    ("a or b", {"a": False, "b": True}, True),
    ("a -> b", {"a": False, "b": False}, True),
    ("a -> b", {"a": True, "b": False}, False),
    ("tp == 1 and cp == 1", {"tp": 1, "cp": 2}, False),
    ("ep in (1, 2)", {"ep": 2}, True),
    ("ep in (1, 2)", {"ep": 4}, False),
    ("tp > 1", {"tp": 2}, True),
    ("tp >= 2", {"tp": 1}, False),
    ("tp < 2", {"tp": 1}, True),
    ("tp <= 1", {"tp": 1}, True),
    ("tp != 1", {"tp": 1}, False),
    ("mode == eager", {"mode": "eager"}, True),
    ("mode != eager", {"mode": "chunked"}, True),
    ("flag == true", {"flag": True}, True),
    ("parallel", {"parallel": False}, False),
    ("true", {}, True),
    ("false", {}, False),
])
def test_evaluates(source: str, env: dict, expected: bool) -> None:
    assert evaluate(lower(source), env) is expected


def test_a_bool_never_equals_an_int() -> None:
    # Python says True == 1; a condition does not.
    assert evaluate(Condition("cmp", name="flag", cmp="==", value=1), {"flag": True}) is False
    assert evaluate(Condition("in", name="n", values=(True,)), {"n": 1}) is False


def test_short_circuits_like_the_logic_says() -> None:
    # The right operand names a missing variable; it is never read.
    assert evaluate(lower("false and missing"), {}) is False
    assert evaluate(lower("true or missing"), {}) is True
    assert evaluate(lower("false -> missing"), {}) is True


def test_a_missing_name_is_a_resolution_error() -> None:
    with pytest.raises(ResolutionError, match="'tp'"):
        evaluate(lower("tp == 1"), {})


def test_a_bare_non_bool_is_a_resolution_error() -> None:
    with pytest.raises(ResolutionError, match="must be a bool"):
        evaluate(lower("chunk"), {"chunk": 3})


def test_ordering_a_string_is_a_resolution_error() -> None:
    with pytest.raises(ResolutionError, match="only numbers are ordered"):
        evaluate(lower("mode > 1"), {"mode": "eager"})


def test_names_in() -> None:
    c = lower("not use_mxfp8 -> parallel and (tp == 1 or mode in (a, b)) and true")
    assert names_in(c) == {"use_mxfp8", "parallel", "tp", "mode"}
    assert names_in(lower("true")) == set()


# --------------------------------------------------------------------------
# Family rules over one environment
# --------------------------------------------------------------------------


def _variant(name: str, when: str | None = None, default: bool = False) -> VariantIR:
    return VariantIR(name, f"pkg.mod:{name}", default, None if when is None else lower(when))


def test_the_otherwise_default_matches_only_when_nothing_else_does() -> None:
    variants = (_variant("local", default=True), _variant("ep", "parallel"))
    assert [v.name for v in matching_variants(variants, {"parallel": True})] == ["ep"]
    assert [v.name for v in matching_variants(variants, {"parallel": False})] == ["local"]


def test_a_default_with_a_condition_matches_by_it() -> None:
    variants = (_variant("a", "mode == a", default=True), _variant("b", "mode == b"))
    assert [v.name for v in matching_variants(variants, {"mode": "c"})] == []
    assert [v.name for v in matching_variants(variants, {"mode": "a"})] == ["a"]


def test_matching_variants_returns_every_match_in_order() -> None:
    variants = (_variant("x", "a"), _variant("y", "a or b"), _variant("z", default=True))
    assert [v.name for v in matching_variants(variants, {"a": True, "b": False})] == ["x", "y"]


def test_a_variant_without_when_or_default_never_matches() -> None:
    variants = (_variant("orphan"), _variant("local", default=True))
    assert [v.name for v in matching_variants(variants, {})] == ["local"]


def test_violated_requires_keep_declaration_order() -> None:
    requires = (RequireIR(lower("f -> m"), "first"), RequireIR(lower("not f"), "second"))
    assert [r.message for r in violated_requires(requires, {"f": True, "m": False})] == [
        "first", "second"]
    assert [r.message for r in violated_requires(requires, {"f": True, "m": True})] == ["second"]
    assert violated_requires(requires, {"f": False, "m": False}) == ()


def test_conditions_built_by_their_slots_equal_those_built_by_init() -> None:
    # condition_from_ast sets Condition's slots directly: right only while its attrs __init__
    # does nothing more than set them.
    assert all(f.validator is None and f.converter is None for f in attrs.fields(Condition))
    assert not hasattr(Condition, "__attrs_post_init__") and not hasattr(Condition, "__attrs_pre_init__")
    leaf = new_condition("cmp", name="tp", cmp="==", value=1)
    node = new_condition("not", operands=(leaf,))
    assert (type(node), node) == (Condition, Condition("not", operands=(Condition("cmp", "tp", "==", 1),)))
    assert new_condition("in", name="a", values=("x", "y")) == Condition("in", name="a", values=("x", "y"))
    lowered = lower("not (a and tp in (1, 2)) -> b or false")
    rebuilt = Condition(lowered.op, lowered.name, lowered.cmp, lowered.value, lowered.values,
                        lowered.operands, lowered.text)
    assert (lowered, hash(lowered)) == (rebuilt, hash(rebuilt))
    assert lowered.text == "not (a and tp in (1, 2)) -> b or false"
