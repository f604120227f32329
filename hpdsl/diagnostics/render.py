"""Diagnostics into text: `path:line:col: error[code]: message`, the line, a caret."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hpdsl.diagnostics.diagnostic import Diagnostic
from hpdsl.diagnostics.span import Source


def headline(diagnostic: Diagnostic) -> str:
    """Return the first line of a diagnostic: `path:line:col: error[code]: message`."""
    span = diagnostic.span
    return (f"{span.file}:{span.line}:{span.col}: {diagnostic.severity}[{diagnostic.code}]: "
            f"{diagnostic.message}")


def render_diagnostic(diagnostic: Diagnostic, sources: Mapping[str, Source]) -> str:
    """Render one diagnostic with its source line, caret and hint."""
    span = diagnostic.span
    lines = [headline(diagnostic)]
    lines += _excerpt(span.file, span.line, span.col, span.end_line, span.end_col, sources)
    if diagnostic.hint:
        lines.append(f"  = hint: {diagnostic.hint}")
    for note in diagnostic.notes:
        n = note.span
        lines.append(f"  = note: {n.file}:{n.line}:{n.col}: {note.message}")
    return "\n".join(lines)


def render_diagnostics(diagnostics: Iterable[Diagnostic], sources: Mapping[str, Source]) -> str:
    """Render many diagnostics and a closing count line."""
    items = list(diagnostics)
    blocks = [render_diagnostic(d, sources) for d in items]
    errors = sum(d.is_error for d in items)
    warnings = len(items) - errors
    summary = f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}"
    return "\n\n".join([*blocks, summary]) if blocks else ""


def _excerpt(file: str, line: int, col: int, end_line: int, end_col: int,
             sources: Mapping[str, Source]) -> list[str]:
    source = sources.get(file)
    if source is None:
        return []
    text = source.line_text(line)
    if not text and line > len(source.text.split("\n")):
        return []
    gutter = f"{line:>4} | "
    width = (end_col - col) if end_line == line else len(text) - col + 1
    text, col, width = _window(text, col, width)
    caret = "^" + "~" * max(0, min(width, WINDOW) - 1)
    return [gutter + text, " " * (len(gutter) + col - 1) + caret]


# The most characters of a source line an excerpt shows: a longer line is shown
# as a window around the caret, so output stays proportional to the diagnostics.
WINDOW = 120
_MARK = "..."


def _window(text: str, col: int, width: int) -> tuple[str, int, int]:
    """Return `text` cut to about WINDOW characters around column `col`, and the caret's new column."""
    if len(text) <= WINDOW:
        return text, col, width
    start = max(0, min(col - 1 - WINDOW // 3, len(text) - WINDOW))
    end = start + WINDOW
    shown = (_MARK if start else "") + text[start:end] + (_MARK if end < len(text) else "")
    return shown, col - start + (len(_MARK) if start else 0), min(width, end - col + 1)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
