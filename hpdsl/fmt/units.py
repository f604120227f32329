"""The formatter's units: output lines printed from one source range, and the positions they span.

hpdsl/fmt/__init__.py lays the AST out as units; hpdsl/fmt/printer.py merges them with the comments.
"""

from __future__ import annotations

from typing import Literal

import attrs

from hpdsl.diagnostics.span import Span

INDENT = "  "
WIDTH = 120

Pos = tuple[int, int]
Role = Literal["open", "stmt", "close"]
Line = tuple[str, str | None]  # code, and the trailing comment it ends with


@attrs.frozen
class Unit:
    """Output lines printed from one source range [start, end)."""

    depth: int
    lines: tuple[str, ...]
    start: Pos
    end: Pos
    role: Role = "stmt"
    group: str = ""  # consecutive top-level units of one group (imports, fields) keep no blank line between


def start_pos(span: Span) -> Pos:
    return (span.line, span.col)


def end_pos(span: Span) -> Pos:
    return (span.end_line, span.end_col)


def after_pos(span: Span, width: int) -> Pos:
    """The position just after a keyword of `width` characters opening `span`."""
    return (span.line, span.col + width)


__all__ = ["INDENT", "WIDTH", "Line", "Pos", "Role", "Unit", "after_pos", "end_pos", "start_pos"]
