"""Units and comments into the output lines of `hpdsl fmt` (the units: hpdsl/fmt/units.py)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from hpdsl import ast
from hpdsl.fmt.units import INDENT, Line, Pos, Unit, start_pos

# --------------------------------------------------------------------------
# Printing: units and comments into lines
# --------------------------------------------------------------------------


class Printer:
    """Merges the units and the comments into the output lines."""

    def __init__(self, units: list[Unit], comments: Sequence[ast.Comment]) -> None:
        self.units = units
        self.leading: list[list[ast.Comment]] = [[] for _ in range(len(units) + 1)]
        self.trailing: dict[int, ast.Comment] = {}
        self.occupied = {line for u in units for line in range(u.start[0], u.end[0] + 1)}
        self.occupied |= {c.span.line for c in comments}
        ends = [u.end for u in units]
        for comment in comments:
            self._place(comment, ends)

    def _place(self, comment: ast.Comment, ends: list[Pos]) -> None:
        pos = start_pos(comment.span)
        index = bisect.bisect_right(ends, pos)  # the first unit ending after the comment
        inside = index < len(self.units) and self.units[index].start < pos
        if (index > 0 and not inside and ends[index - 1][0] == pos[0]
                and index - 1 not in self.trailing):
            self.trailing[index - 1] = comment
        else:
            self.leading[index].append(comment)

    def text(self) -> str:
        """Return the formatted text, ending in one newline (empty for an empty file)."""
        out: list[Line] = []
        prev: tuple[int, Unit | None] | None = None  # (last source line, unit or None)
        for index in range(len(self.units) + 1):
            unit = self.units[index] if index < len(self.units) else None
            for number, comment in enumerate(self.leading[index]):
                self._blank(out, prev, comment.span.line, unit, first=number == 0, is_unit=False)
                depth = 0 if unit is None else unit.depth + (unit.role == "close")
                out.append((INDENT * depth + comment.text, None))
                prev = (comment.span.line, None)
            if unit is not None:
                self._blank(out, prev, unit.start[0], unit, first=not self.leading[index],
                            is_unit=True)
                out.extend(self._unit_lines(index, unit))
                prev = (unit.end[0], unit)
        return "".join(line.rstrip() + "\n" for line in align(out))

    def _unit_lines(self, index: int, unit: Unit) -> list[Line]:
        lines: list[Line] = [(INDENT * unit.depth + line, None) for line in unit.lines]
        if index in self.trailing:
            lines[-1] = (lines[-1][0], self.trailing[index].text)
        return lines

    def _blank(self, out: list[Line], prev: tuple[int, Unit | None] | None, line: int,
               unit: Unit | None, *, first: bool, is_unit: bool) -> None:
        """Add a blank line before an element where the canonical form or the source has one."""
        if prev is None:
            return
        prev_line, prev_unit = prev
        if first and starts_declaration(unit) and not imports_together(prev_unit, unit):
            out.append(("", None))
        elif (prev_unit is not None and prev_unit.role == "open") or (
                is_unit and unit is not None and unit.role == "close"):
            return  # never a blank line just inside a brace
        elif any(n not in self.occupied for n in range(prev_line + 1, line)):
            out.append(("", None))


def starts_declaration(unit: Unit | None) -> bool:
    """Whether a unit opens a top-level declaration (None: the comments closing the file)."""
    return unit is None or (unit.depth == 0 and unit.role != "close")


def imports_together(prev: Unit | None, unit: Unit | None) -> bool:
    """Whether two units are consecutive imports (or field declarations), which stay together."""
    return prev is not None and unit is not None and prev.group != "" and prev.group == unit.group


def align(lines: list[Line]) -> list[str]:
    """Line up the trailing comments of consecutive lines in one column, two spaces out."""
    out: list[str] = []
    run: list[tuple[str, str]] = []
    for code, comment in [*lines, ("", None)]:
        if comment is not None:
            run.append((code, comment))
            continue
        width = max((len(c) for c, _ in run), default=0)
        out += [f"{c.ljust(width)}  {text}" for c, text in run]
        run = []
        out.append(code)
    return out[:-1]


__all__ = ["Printer"]
