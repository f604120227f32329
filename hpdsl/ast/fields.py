"""The types selectors and fields declare (bool, int, enum, scalar) and model field declarations."""

from __future__ import annotations

from typing import Literal as TypingLiteral
from typing import Union

import attrs

from hpdsl.ast.leaves import Literal, Name, _span
from hpdsl.diagnostics.span import Span


# --------------------------------------------------------------------------
# Selector and field types
# --------------------------------------------------------------------------


@attrs.frozen
class BoolType:
    """`bool`."""

    span: Span = _span()


@attrs.frozen
class IntType:
    """`int` or `int(lo..hi)`."""

    low: Literal | None
    high: Literal | None
    span: Span = _span()


@attrs.frozen
class EnumType:
    """`enum(a, b, c)`."""

    values: tuple[Name, ...]
    span: Span = _span()


SelectorType = Union[BoolType, IntType, EnumType]


# --------------------------------------------------------------------------
# Model field declarations
# --------------------------------------------------------------------------


ScalarKind = TypingLiteral["int", "float", "string"]


@attrs.frozen
class ScalarType:
    """`int`, `float` or `string`: a field's type that is neither a flag nor an enum."""

    kind: ScalarKind
    span: Span = _span()


FieldType = Union[BoolType, ScalarType, EnumType]


@attrs.frozen
class FieldBound:
    """`>= 1` or `<= 1048576`: a bound of an int field."""

    op: str
    value: Literal
    span: Span = _span()


@attrs.frozen
class FieldDecl:
    """`field NAME: TYPE [BOUNDS] [in BLOCK] [= DEFAULT | required] [hf(KEYS)] "MEANING"`: one model field."""

    name: Name
    type: FieldType
    bounds: tuple[FieldBound, ...]
    block: Name | None
    default: Literal | Name | None
    required: bool
    hf: tuple[Name, ...]
    meaning: Literal
    span: Span = _span()
