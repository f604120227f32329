"""hpdsl diagnostics into LSP diagnostics: the same range, code, severity, hint and notes, per file.

A Span is 1-based with an exclusive end and counts code points; an LSP Range is
0-based with an exclusive end and counts units of the negotiated encoding, so
both ends are converted in the text the span stands in (hpdsl/lsp/positions.py).
Every file of a document's import closure gets its own diagnostics; the
document also shows, at each `import` line, the errors of what that import
brings in (so a broken import is seen where it is imported).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpdsl import ast
from hpdsl.diagnostics import Diagnostic, Span
from hpdsl.lsp.analysis import Analysis
from hpdsl.lsp.positions import Lines, span_range

SOURCE = "hpdsl"


class Ranges:
    """Span-to-Range conversion for the files of one analysis, each file's lines split once."""

    def __init__(self, analysis: Analysis, encoding: str) -> None:
        self.analysis = analysis
        self.encoding = encoding
        self.lines: dict[str, Lines] = {}

    def of(self, span: Span) -> dict[str, Any]:
        """Return the LSP range of a span of any file in the analysis."""
        lines = self.lines.get(span.file)
        if lines is None:
            lines = Lines.of(self.analysis.texts.get(span.file, ""), self.encoding)
            self.lines[span.file] = lines
        return span_range(lines, span.line, span.col, span.end_line, span.end_col)

    def location(self, span: Span) -> dict[str, Any]:
        """Return the LSP location (URI and range) of a span."""
        return {"uri": self.analysis.path_of(span).as_uri(), "range": self.of(span)}


def per_file(analysis: Analysis, encoding: str) -> dict[Path, list[dict[str, Any]]]:
    """Return the LSP diagnostics of every user file the analysis checked, the document's import lines included."""
    ranges = Ranges(analysis, encoding)
    out: dict[Path, list[dict[str, Any]]] = {path: [] for path in analysis.closure().values()}
    for diagnostic in analysis.diagnostics:
        path = analysis.path_of(diagnostic.span)
        if path in out:
            out[path].append(convert(ranges, diagnostic))
    own = analysis.paths.get(analysis.name, Path(analysis.name))
    out.setdefault(own, []).extend(_at_imports(analysis, ranges))
    return out


def convert(ranges: Ranges, diagnostic: Diagnostic) -> dict[str, Any]:
    """Return one hpdsl diagnostic as an LSP diagnostic (the hint in the message and in `data`)."""
    message = diagnostic.message + (f"\nhint: {diagnostic.hint}" if diagnostic.hint else "")
    out: dict[str, Any] = {"range": ranges.of(diagnostic.span), "message": message,
                           "severity": 1 if diagnostic.is_error else 2,
                           "code": diagnostic.code, "source": SOURCE}
    if diagnostic.notes:
        out["relatedInformation"] = [{"location": ranges.location(note.span), "message": note.message}
                                     for note in diagnostic.notes]
    if diagnostic.hint:
        out["data"] = {"hint": diagnostic.hint}
    return out


def _at_imports(analysis: Analysis, ranges: Ranges) -> list[dict[str, Any]]:
    """Return, for each import of the document that brings in errors, one diagnostic at the import."""
    document = analysis.document
    if document is None:
        return []
    imports = _imports_by_file(analysis)
    out = []
    for item in document.items:
        if not isinstance(item, ast.ImportDecl):
            continue
        reached = _reached(imports, _target(analysis, item), analysis.name)
        errors = [d for d in analysis.diagnostics if d.is_error and d.span.file in reached]
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            out.append({"range": ranges.of(item.span), "severity": 1, "code": first.code, "source": SOURCE,
                        "message": f"the imported file has errors{more}: {first.message}",
                        "relatedInformation": [{"location": ranges.location(d.span), "message": d.message}
                                               for d in errors[:20]]})
    return out


def _target(analysis: Analysis, item: ast.ImportDecl) -> str | None:
    """Return the source name an import of the document loaded (None if it loaded nothing)."""
    try:
        wanted = (Path(analysis.name).parent / str(item.path.value)).resolve()
    except (OSError, ValueError, RuntimeError):
        return None
    return next((name for name, path in analysis.paths.items() if path == wanted), None)


def _imports_by_file(analysis: Analysis) -> dict[str, list[str]]:
    by_path = {path: name for name, path in analysis.paths.items()}
    out: dict[str, list[str]] = {}
    for file in analysis.files:
        folder = analysis.paths.get(file.path, Path(file.path)).parent
        for item in file.items:
            if isinstance(item, ast.ImportDecl):
                try:
                    name = by_path.get((folder / str(item.path.value)).resolve())
                except (OSError, ValueError, RuntimeError):
                    continue
                if name is not None:
                    out.setdefault(file.path, []).append(name)
    return out


def _reached(imports: dict[str, list[str]], start: str | None, document: str) -> set[str]:
    """Return the source names an import reaches, through the imports of what it imports."""
    seen: set[str] = set()
    todo = [start] if start else []
    while todo:
        name = todo.pop()
        if name in seen or name == document:
            continue
        seen.add(name)
        todo.extend(imports.get(name, ()))
    return seen
