"""Leaves of the AST (names, literals, comments) and the span field every node carries."""

from __future__ import annotations

from typing import Literal as TypingLiteral

import attrs

from hpdsl.diagnostics.span import NO_SPAN, Span


def _span() -> Span:
    return attrs.field(default=NO_SPAN, eq=False, repr=False, kw_only=True)


# --------------------------------------------------------------------------
# Leaves
# --------------------------------------------------------------------------

LiteralKind = TypingLiteral["int", "float", "bool", "string"]


@attrs.frozen
class Name:
    """An identifier: a declaration's name or a reference to one."""

    value: str
    span: Span = _span()


@attrs.frozen
class Literal:
    """A literal value; `kind` keeps `true` and `1` apart (Python says True == 1)."""

    value: int | float | bool | str
    kind: LiteralKind
    span: Span = _span()


@attrs.frozen
class Comment:
    """A source comment, kept so `hpdsl fmt` can write it back."""

    text: str
    span: Span = _span()
