"""hpdsl diagnostics into LSP diagnostics: the same range, code, severity, hint and notes.

A Span is 1-based with an exclusive end; an LSP Range is 0-based with an
exclusive end, so both ends move by one. Columns count code points, which equals
LSP's UTF-16 units for every character of the grammar's tokens (ASCII).
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp

from hpdsl.diagnostics import Diagnostic, Span
from hpdsl.lsp.analysis import Analysis

SOURCE = "hpdsl"


def to_range(span: Span) -> lsp.Range:
    """Return the LSP range of a span."""
    return lsp.Range(start=lsp.Position(line=span.line - 1, character=span.col - 1),
                     end=lsp.Position(line=span.end_line - 1, character=max(span.end_col, span.col) - 1))


def document_diagnostics(analysis: Analysis) -> list[lsp.Diagnostic]:
    """Return the LSP diagnostics of the document itself (not of the files it imports)."""
    return [_convert(analysis, d) for d in analysis.diagnostics if d.span.file == analysis.name]


def _convert(analysis: Analysis, diagnostic: Diagnostic) -> lsp.Diagnostic:
    severity = (lsp.DiagnosticSeverity.Error if diagnostic.is_error
                else lsp.DiagnosticSeverity.Warning)
    message = diagnostic.message + (f"\nhint: {diagnostic.hint}" if diagnostic.hint else "")
    related = [lsp.DiagnosticRelatedInformation(
        location=lsp.Location(uri=_uri(analysis, note.span), range=to_range(note.span)),
        message=note.message) for note in diagnostic.notes]
    return lsp.Diagnostic(range=to_range(diagnostic.span), message=message, severity=severity,
                          code=diagnostic.code, source=SOURCE, related_information=related or None,
                          data={"hint": diagnostic.hint} if diagnostic.hint else None)


def _uri(analysis: Analysis, span: Span) -> str:
    return Path(analysis.path_of(span)).as_uri()
