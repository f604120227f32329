"""LSP positions (0-based, columns in the negotiated encoding) into hpdsl's 1-based code-point columns, and back.

LSP counts a line's characters in UTF-16 code units unless client and server
agree on another encoding at `initialize` (`general.positionEncodings`, the
client's preference first; the server takes UTF-8 or UTF-32 when the client
lists one before UTF-16). hpdsl's spans count code points. An astral character
(an emoji) is two UTF-16 units and four UTF-8 bytes, so every column crossing
the boundary is converted, line by line, from the text the span stands in.
A position inside a character (half a surrogate pair) moves to that character's
start, as the specification asks.
"""

from __future__ import annotations

from typing import Any

import attrs

ENCODINGS = ("utf-16", "utf-8", "utf-32")
MAX_UINT = 2**31 - 1
"""LSP's `uinteger`: a line or character above it is not a position."""


class BadPosition(ValueError):
    """A position that is not one: not two non-negative integers, or past the document's lines."""


def negotiate(capabilities: Any) -> str:
    """Return the position encoding to use: the client's first supported choice, else UTF-16."""
    general = capabilities.get("general") if isinstance(capabilities, dict) else None
    offered = general.get("positionEncodings") if isinstance(general, dict) else None
    for encoding in offered if isinstance(offered, list) else ():
        if encoding in ENCODINGS:
            return str(encoding)
    return "utf-16"


def _width(char: str, encoding: str) -> int:
    point = ord(char)
    if encoding == "utf-16":
        return 2 if point > 0xFFFF else 1
    if encoding == "utf-8":
        return 1 if point < 0x80 else 2 if point < 0x800 else 3 if point < 0x10000 else 4
    return 1


def units(line: str, points: int, encoding: str) -> int:
    """Return how many encoding units the first `points` code points of a line take (past its end: one each)."""
    if encoding == "utf-32" or line.isascii():
        return points
    head = line[:points]
    return sum(_width(c, encoding) for c in head) + max(0, points - len(head))


def points(line: str, count: int, encoding: str) -> int:
    """Return the code-point column of `count` encoding units into a line (inside a character: its start)."""
    if encoding == "utf-32" or line.isascii():
        return min(count, len(line))
    taken = 0
    for index, char in enumerate(line):
        taken += _width(char, encoding)
        if taken > count:
            return index
    return len(line)


@attrs.frozen
class Lines:
    """A text's lines, to convert positions in it (the text is split at \\n; a \\r before it is a character)."""

    lines: tuple[str, ...]
    encoding: str = "utf-16"

    @classmethod
    def of(cls, text: str, encoding: str = "utf-16") -> Lines:
        """Return the lines of a text."""
        return cls(tuple(text.split("\n")), encoding)

    def line(self, number: int) -> str:
        """Return a 0-based line ('' past the end)."""
        return self.lines[number] if 0 <= number < len(self.lines) else ""

    def to_lsp(self, line: int, col: int) -> dict[str, int]:
        """Return the LSP position of a 1-based line and code-point column."""
        return {"line": max(line - 1, 0), "character": units(self.line(line - 1), max(col - 1, 0), self.encoding)}

    def from_lsp(self, position: Any) -> tuple[int, int]:
        """Return the 1-based line and code-point column of an LSP position; raise BadPosition if invalid."""
        line, character = _checked(position)
        if line >= len(self.lines):
            raise BadPosition(f"line {line} is past the document's end ({len(self.lines)} lines)")
        return line + 1, points(self.lines[line], character, self.encoding) + 1

    def offset(self, position: Any) -> int:
        """Return the string index of an LSP position (past the end of a line or the text: clamped)."""
        line, character = _checked(position)
        if line >= len(self.lines):
            return sum(len(text) + 1 for text in self.lines) - 1
        start = sum(len(text) + 1 for text in self.lines[:line])
        return start + points(self.lines[line], character, self.encoding)


def _checked(position: Any) -> tuple[int, int]:
    if not isinstance(position, dict):
        raise BadPosition(f"a position is an object {{line, character}}, not {type(position).__name__}")
    line, character = position.get("line"), position.get("character")
    for name, value in (("line", line), ("character", character)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_UINT:
            raise BadPosition(f"position {name} {value!r} is not an integer from 0 to {MAX_UINT}")
    assert isinstance(line, int) and isinstance(character, int)
    return line, character


def span_range(lines: Lines, line: int, col: int, end_line: int, end_col: int) -> dict[str, Any]:
    """Return the LSP range of a 1-based span (an empty or inverted end becomes the start)."""
    start = lines.to_lsp(line, col)
    if (end_line, end_col) < (line, col):
        end_line, end_col = line, col
    return {"start": start, "end": lines.to_lsp(end_line, end_col)}
