"""Quick fixes from the hints the checker already gives: the edit that does what the hint says.

- "did you mean 'x'?": replace the diagnostic's text with x;
- heads-not-divisible ("kv_heads must divide heads: one of 1, 2, 4"): set kv_heads
  to each listed divisor, the nearest below the stated value preferred;
- a missing field whose hint states it with a value (`ffn_width 11008`,
  `max_positions 1024`): add that line to the model.
Each action carries the diagnostic it fixes, as LSP clients show them together.
"""

from __future__ import annotations

import re
from typing import Any

from hpdsl import ast
from hpdsl.diagnostics import Diagnostic, Span
from hpdsl.lsp.analysis import Analysis
from hpdsl.lsp.diagnostics import Ranges, convert
from hpdsl.model.fields import FIELDS

_DID_YOU_MEAN = re.compile(r"did you mean '([A-Za-z_][A-Za-z0-9_]*)'\?")
_DIVISORS = re.compile(r"one of ([0-9, ]+)$")
_STATED = re.compile(r"`([a-z_]+) ([0-9A-Za-z_.]+)`")


def quick_fixes(analysis: Analysis, uri: str, start: tuple[int, int], end: tuple[int, int],
                encoding: str) -> list[dict[str, Any]]:
    """Return the quick fixes for the document's diagnostics that touch the 1-based range start..end."""
    ranges = Ranges(analysis, encoding)
    out = []
    for diagnostic in analysis.diagnostics:
        span = diagnostic.span
        if span.file != analysis.name or (span.end_line, span.end_col) < start or (span.line, span.col) > end:
            continue
        for title, edit_span, text, preferred in _fixes(analysis, diagnostic):
            out.append({"title": title, "kind": "quickfix", "isPreferred": preferred,
                        "diagnostics": [convert(ranges, diagnostic)],
                        "edit": {"changes": {uri: [{"range": ranges.of(edit_span), "newText": text}]}}})
    return out


def _fixes(analysis: Analysis, diagnostic: Diagnostic) -> list[tuple[str, Span, str, bool]]:
    hint = diagnostic.hint or ""
    found = _DID_YOU_MEAN.search(hint)
    if found:
        return [(f"Change to '{found.group(1)}'", diagnostic.span, found.group(1), True)]
    if diagnostic.code == "heads-not-divisible":
        return _divisors(analysis, diagnostic, hint)
    if diagnostic.code == "missing-field":
        return _missing(analysis, diagnostic, hint)
    return []


def _divisors(analysis: Analysis, diagnostic: Diagnostic, hint: str) -> list[tuple[str, Span, str, bool]]:
    listed = _DIVISORS.search(hint)
    if listed is None:
        return []
    values = [int(v) for v in listed.group(1).replace(" ", "").split(",") if v]
    stated = _text(analysis, diagnostic.span)
    current = int(stated) if stated.isdigit() else 0
    best = max((v for v in values if v <= current), default=values[-1] if values else 0)
    return [(f"Set kv_heads to {v}", diagnostic.span, str(v), v == best) for v in values]


def _missing(analysis: Analysis, diagnostic: Diagnostic, hint: str) -> list[tuple[str, Span, str, bool]]:
    model = _model_around(analysis, diagnostic.span)
    if model is None:
        return []
    lines = [f"{name} {value}" for name, value in _STATED.findall(hint) if name in FIELDS]
    return [(f"Add `{line}` to model '{model.name.value}'", *_insertion(analysis, model, line), i == 0)
            for i, line in enumerate(lines)]


def _model_around(analysis: Analysis, span: Span) -> ast.Model | None:
    document = analysis.document
    for item in document.items if document else ():
        if isinstance(item, ast.Model) and (item.span.line, item.span.col) <= (span.line, span.col) \
                and (span.end_line, span.end_col) <= (item.span.end_line, item.span.end_col):
            return item
    return None


def _insertion(analysis: Analysis, model: ast.Model, line: str) -> tuple[Span, str]:
    """Return where and what to insert to add a line before the model's closing brace."""
    lines = analysis.text.split("\n")
    end_line, end_col = model.span.end_line, model.span.end_col - 1  # the `}`
    before = lines[end_line - 1][:end_col - 1] if end_line <= len(lines) else ""
    if before.strip():
        return Span(analysis.name, end_line, end_col, end_line, end_col), f" {line} "
    return Span(analysis.name, end_line, 1, end_line, 1), f"  {line}\n"


def _text(analysis: Analysis, span: Span) -> str:
    lines = analysis.text.split("\n")
    if span.line != span.end_line or span.line > len(lines):
        return ""
    return lines[span.line - 1][span.col - 1:span.end_col - 1]
