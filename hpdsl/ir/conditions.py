"""Condition ASTs into Condition IR, and Condition IR into text and truth values.

The semantics of a family's rules live here, once. The static coverage check
(hpdsl/check/coverage.py) and the torch backend's runtime resolution both call
`evaluate`, `violated_requires` and `matching_variants`, so what the checker
proves about a family is what the runtime does.

Names a condition may use, and what they stand for in the environment:

- a selector name: the selector's value (bool, int or enum value as a str);
- `tp`, `cp`, `ep`, `pp`: the size of that mesh axis, a positive int;
- `parallel`: true iff the size of the family's `parallel` axis is > 1.

Variant selection, for an environment that meets every require:

- a variant with `when C` matches iff C holds;
- the one `default` variant is the baseline. Without `when` it matches exactly
  when no other variant matches ("otherwise"); `default when C` matches iff C
  holds;
- a non-default variant without `when` never matches by rule;
- over the allowed domain exactly one variant must match (the checker proves
  it; `matching_variants` returns all matches so a caller can tell).

An assignment is *allowed* when every require holds. A request violating a
require is rejected before selection with that require's message; callers
report the first violated require in declaration order, so `violated_requires`
keeps that order.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from hpdsl import ast
from hpdsl.errors import ResolutionError
from hpdsl.ir.nodes import Condition, ConditionOp, RequireIR, Scalar, VariantIR

# Binding strength, loosest first; a child weaker than its parent needs parentheses.
_IMPLIES, _OR, _AND, _NOT, _ATOM = range(5)

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_KEYWORDS = frozenset({"true", "false", "not", "and", "or", "in", "if"})

_COMPARE: dict[str, Callable[[Scalar, Scalar], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


# --------------------------------------------------------------------------
# AST -> IR
# --------------------------------------------------------------------------


def condition_from_ast(expr: ast.Expr) -> Condition:
    """Return the Condition IR of a condition AST, its canonical text filled in."""
    condition, text, _ = _lowered(expr)
    _SET_TEXT(condition, text)  # a node of its own, not yet seen by anyone
    return condition


def _lowered(expr: ast.Expr) -> tuple[Condition, str, int]:
    # The node, its canonical text and binding strength in one walk: render_condition's text
    # (tests/ir/test_conditions.py holds the two equal) without a second pass over the tree.
    return _FROM_AST[type(expr)](expr)


# Condition has no validators or converters (tests/ir/test_conditions.py checks), so setting its
# slots builds what its attrs __init__ builds, in about half the time: the node builds are the
# largest share of lowering a family, which every check does for the coverage proof.
_SET_OP, _SET_NAME, _SET_CMP, _SET_VALUE, _SET_VALUES, _SET_OPERANDS, _SET_TEXT = (
    Condition.__dict__[f.name].__set__ for f in attrs.fields(Condition))


def new_condition(op: ConditionOp, name: str | None = None, cmp: str | None = None,
                  value: Scalar | None = None, values: tuple[Scalar, ...] = (),
                  operands: tuple[Condition, ...] = ()) -> Condition:
    """Return Condition(op, name, cmp, value, values, operands), its text empty."""
    node: Condition = object.__new__(Condition)
    _SET_OP(node, op)
    _SET_NAME(node, name)
    _SET_CMP(node, cmp)
    _SET_VALUE(node, value)
    _SET_VALUES(node, values)
    _SET_OPERANDS(node, operands)
    _SET_TEXT(node, "")
    return node


def _junction(expr: ast.AllOf | ast.AnyOf) -> tuple[Condition, str, int]:
    op: ConditionOp
    op, level = ("and", _AND) if isinstance(expr, ast.AllOf) else ("or", _OR)
    parts = [_lowered(o) for o in expr.operands]
    # A nested and/or of the same kind only arises from parentheses; keep them.
    text = f" {op} ".join([t if strength > level else f"({t})" for _, t, strength in parts])
    return new_condition(op, operands=tuple([c for c, _, _ in parts])), text, level


def _negation(expr: ast.Negation) -> tuple[Condition, str, int]:
    operand, text, level = _lowered(expr.operand)
    return new_condition("not", operands=(operand,)), "not " + _parenthesised(text, level, _NOT), _NOT


def _implies(expr: ast.Implies) -> tuple[Condition, str, int]:
    premise, p_text, p_level = _lowered(expr.premise)
    conclusion, c_text, c_level = _lowered(expr.conclusion)
    text = f"{_parenthesised(p_text, p_level, _OR)} -> {_parenthesised(c_text, c_level, _OR)}"
    return new_condition("implies", operands=(premise, conclusion)), text, _IMPLIES


def _comparison(expr: ast.Comparison) -> tuple[Condition, str, int]:
    value = _operand(expr.right)
    name = expr.left.value
    return (new_condition("cmp", name=name, cmp=expr.op, value=value),
            f"{name} {expr.op} {render_value(value)}", _ATOM)


def _membership(expr: ast.Membership) -> tuple[Condition, str, int]:
    values = tuple([_operand(v) for v in expr.values])
    name = expr.left.value
    return (new_condition("in", name=name, values=values),
            f"{name} in ({', '.join([render_value(v) for v in values])})", _ATOM)


def _parenthesised(text: str, level: int, least: int) -> str:
    return text if level >= least else f"({text})"


# One builder per condition AST class (a dict lookup, not a chain of isinstance tests).
_FROM_AST: dict[type, Callable[[Any], tuple[Condition, str, int]]] = {
    ast.Reference: lambda e: (new_condition("ref", name=e.name.value), str(e.name.value), _ATOM),
    ast.Constant: lambda e: (new_condition("const", value=e.value), render_value(bool(e.value)), _ATOM),
    ast.Comparison: _comparison,
    ast.Membership: _membership,
    ast.Negation: _negation,
    ast.Implies: _implies,
    ast.AllOf: _junction,
    ast.AnyOf: _junction,
}


def _operand(node: ast.Literal | ast.Name) -> Scalar:
    # An enum value is written as a bare name; in the IR it is the str it names.
    return node.value


# --------------------------------------------------------------------------
# IR -> text
# --------------------------------------------------------------------------


def render_condition(condition: Condition) -> str:
    """Return the canonical text of a condition: the grammar's syntax, minimal parentheses."""
    return _render(condition)[0]


def render_value(value: Scalar) -> str:
    """Return a condition operand as it is written: true/false, a number, a name or a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if _BARE.match(value) and value not in _KEYWORDS else _quote(value)
    return repr(value)


def _quote(value: str) -> str:
    # The inverse of the grammar's STRING; kept here so the IR never imports the parser.
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'


def _render(c: Condition) -> tuple[str, int]:
    if c.op == "ref":
        return str(c.name), _ATOM
    if c.op == "const":
        return render_value(bool(c.value)), _ATOM
    if c.op == "cmp":
        assert c.value is not None  # a comparison always has its operand (see Condition)
        return f"{c.name} {c.cmp} {render_value(c.value)}", _ATOM
    if c.op == "in":
        return f"{c.name} in ({', '.join(render_value(v) for v in c.values)})", _ATOM
    if c.op == "not":
        return "not " + _wrap(c.operands[0], _NOT), _NOT
    if c.op == "implies":
        premise, conclusion = c.operands
        return f"{_wrap(premise, _OR)} -> {_wrap(conclusion, _OR)}", _IMPLIES
    level = _AND if c.op == "and" else _OR
    # A nested and/or of the same kind only arises from parentheses; keep them.
    return f" {c.op} ".join(_wrap(o, level + 1) for o in c.operands), level


def _wrap(c: Condition, least: int) -> str:
    text, level = _render(c)
    return text if level >= least else f"({text})"


# --------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------


def evaluate(condition: Condition, env: Mapping[str, Scalar]) -> bool:
    """Return whether `condition` holds where `env` gives every name it uses its value.

    `env` maps selector names, "parallel" and the axes tp/cp/ep/pp to values.
    Raise ResolutionError when a name is missing or a value has the wrong type.
    """
    # The commonest operators first, and loops rather than all()/any() over generators:
    # the coverage check evaluates every condition of a family at every assignment.
    op = condition.op
    if op == "ref":
        return _truth(condition, env)
    if op == "cmp":
        return _compare(condition, _lookup(condition, env))
    if op == "and":
        for operand in condition.operands:
            if not evaluate(operand, env):
                return False
        return True
    if op == "not":
        return not evaluate(condition.operands[0], env)
    if op == "or":
        for operand in condition.operands:
            if evaluate(operand, env):
                return True
        return False
    if op == "const":
        return bool(condition.value)
    if op == "in":
        left = _lookup(condition, env)
        return any(_equal(left, v) for v in condition.values)
    premise, conclusion = condition.operands
    return not evaluate(premise, env) or evaluate(conclusion, env)


_MISSING = object()


def _lookup(condition: Condition, env: Mapping[str, Scalar]) -> Scalar:
    try:
        return env[str(condition.name)]
    except KeyError:
        raise ResolutionError(f"condition '{render_condition(condition)}' uses "
                              f"'{condition.name}', which has no value") from None


def _truth(condition: Condition, env: Mapping[str, Scalar]) -> bool:
    value = env.get(str(condition.name), _MISSING)
    if value is True or value is False:  # the common case, without a call
        return value
    value = _lookup(condition, env)
    if not isinstance(value, bool):
        raise ResolutionError(f"'{condition.name}' must be a bool to stand alone in a "
                              f"condition, found {value!r}")
    return value


def _equal(left: Scalar, right: Scalar) -> bool:
    # Python says True == 1; a bool selector and an int never compare equal here.
    return isinstance(left, bool) == isinstance(right, bool) and left == right


def _compare(condition: Condition, left: Scalar) -> bool:
    right = condition.value
    assert right is not None
    if condition.cmp == "==":
        return _equal(left, right)
    if condition.cmp == "!=":
        return not _equal(left, right)
    if not _is_number(left) or not _is_number(right):
        raise ResolutionError(f"'{render_condition(condition)}' orders {left!r} and {right!r}; "
                              "only numbers are ordered")
    return _COMPARE[str(condition.cmp)](left, right)


def _is_number(value: Scalar) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def names_in(condition: Condition) -> set[str]:
    """Return every name a condition reads: selectors, axes and "parallel"."""
    names = {condition.name} if condition.name is not None else set()
    for operand in condition.operands:
        names |= names_in(operand)
    return names


# --------------------------------------------------------------------------
# Family rules over one environment
# --------------------------------------------------------------------------


def violated_requires(requires: Iterable[RequireIR], env: Mapping[str, Scalar]) -> tuple[RequireIR, ...]:
    """Return the requires that do not hold in `env`, in declaration order."""
    return tuple([r for r in requires if not evaluate(r.condition, env)])


def matching_variants(variants: Sequence[VariantIR], env: Mapping[str, Scalar]) -> tuple[VariantIR, ...]:
    """Return the variants whose rule matches `env`, in declaration order (see module docs)."""
    ruled = [v for v in variants if v.when is not None and evaluate(v.when, env)]
    if ruled:
        return tuple(ruled)
    # The "otherwise" default matches exactly when no ruled variant does.
    return tuple(v for v in variants if v.default and v.when is None)
