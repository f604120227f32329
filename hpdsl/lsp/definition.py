"""Go to definition: a profile, kind, family, op, selector, `from` base or import to where it is declared."""

from __future__ import annotations

from pathlib import Path

import attrs

from hpdsl import ast
from hpdsl.diagnostics import Span
from hpdsl.lsp.analysis import Analysis, contains, name_at
from hpdsl.lsp.resolve import declaration, resolve


@attrs.frozen
class Place:
    """A file on disk and a span in it (what the server turns into an LSP Location)."""

    path: Path
    span: Span


def definition(analysis: Analysis, line: int, col: int) -> Place | None:
    """Return where the name or import at a 1-based position is declared."""
    imported = _import_at(analysis, line, col)
    if imported is not None:
        return imported
    occurrence = name_at(analysis, line, col)
    target = resolve(occurrence) if occurrence else None
    found = declaration(analysis, target) if target else None
    if found is None:
        return None
    _, span = found
    return Place(analysis.path_of(span), span)


def _import_at(analysis: Analysis, line: int, col: int) -> Place | None:
    """Return the start of the file an `import "..."` under the position names."""
    document = analysis.document
    for item in document.items if document else ():
        if isinstance(item, ast.ImportDecl) and contains(item.span, line, col):
            target = (Path(analysis.name).parent / str(item.path.value)).resolve()
            if target.is_file():
                return Place(target, Span(str(target), 1, 1, 1, 1))
    return None
