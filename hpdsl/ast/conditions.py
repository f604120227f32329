"""Conditions: the boolean expressions of `require`, `when` and `if`."""

from __future__ import annotations

from typing import Union

import attrs

from hpdsl.ast.leaves import Literal, Name, _span
from hpdsl.diagnostics.span import Span


# --------------------------------------------------------------------------
# Conditions
# --------------------------------------------------------------------------


@attrs.frozen
class Reference:
    """A bare name in a condition: a bool selector or `parallel`."""

    name: Name
    span: Span = _span()


@attrs.frozen
class Constant:
    """`true` or `false` in a condition."""

    value: bool
    span: Span = _span()


@attrs.frozen
class Comparison:
    """`tp > 1`, `backend == eager`."""

    left: Name
    op: str
    right: Literal | Name
    span: Span = _span()


@attrs.frozen
class Membership:
    """`ep in (1, 2)`."""

    left: Name
    values: tuple[Literal | Name, ...]
    span: Span = _span()


@attrs.frozen
class Negation:
    """`not EXPR`."""

    operand: Expr
    span: Span = _span()


@attrs.frozen
class AllOf:
    """`A and B and ...`."""

    operands: tuple[Expr, ...]
    span: Span = _span()


@attrs.frozen
class AnyOf:
    """`A or B or ...`."""

    operands: tuple[Expr, ...]
    span: Span = _span()


@attrs.frozen
class Implies:
    """`A -> B`."""

    premise: Expr
    conclusion: Expr
    span: Span = _span()


Expr = Union[Reference, Constant, Comparison, Membership, Negation, AllOf, AnyOf, Implies]
