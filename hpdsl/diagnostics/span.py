"""Source texts and the spans that locate every construct in them."""

from __future__ import annotations

import attrs


@attrs.frozen
class Span:
    """A region of one source file; lines and columns are 1-based, the end exclusive."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    @classmethod
    def point(cls, file: str, line: int = 1, col: int = 1) -> Span:
        """Return an empty span at one position (for errors about a whole file)."""
        return cls(file, line, col, line, col + 1)

    def to(self, other: Span) -> Span:
        """Return the span from the start of this one to the end of ``other``."""
        return Span(self.file, self.line, self.col, other.end_line, other.end_col)


@attrs.frozen
class Source:
    """One source text and the name it is shown under in diagnostics."""

    name: str
    text: str

    def line_text(self, line: int) -> str:
        """Return line ``line`` (1-based) without its newline, tabs expanded."""
        # A leading byte-order mark is no character of the line (the parsers skip it).
        lines = self.text.removeprefix("\ufeff").split("\n")
        if 1 <= line <= len(lines):
            return lines[line - 1].expandtabs(4)
        return ""


NO_SPAN = Span("<none>", 1, 1, 1, 1)
