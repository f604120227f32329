"""LSP requests and notifications into the feature modules, their answers into LSP JSON.

Each handler takes the workspace and the request's params (a dict, as sent),
converts the position from the negotiated encoding into hpdsl's 1-based
code-point line and column (hpdsl/lsp/positions.py), calls the feature, and
converts spans back. A malformed param is a RequestError (a JSON-RPC error).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpdsl.lsp.positions import Lines, span_range, units
from hpdsl.lsp.workspace import RequestError, Workspace, path_of

_COMPLETION_KINDS = {"keyword": 14, "field": 5, "slot": 10, "family": 9, "profile": 9, "kind": 7,
                     "op": 21, "selector": 6, "value": 12}
_SYMBOL_KINDS = {"profile": 3, "family": 2, "model": 23, "kind": 5, "selector": 13, "variant": 22}


def capabilities(encoding: str) -> dict[str, Any]:
    """Return what the server offers, in the encoding it negotiated."""
    return {
        "positionEncoding": encoding,
        "textDocumentSync": {"openClose": True, "change": 2, "save": False},
        "hoverProvider": True, "definitionProvider": True, "referencesProvider": True,
        "documentSymbolProvider": True, "documentFormattingProvider": True,
        "renameProvider": {"prepareProvider": True},
        "codeActionProvider": {"codeActionKinds": ["quickfix"]},
        "completionProvider": {"triggerCharacters": [" ", "{", ":", "["]},
    }


def _uri(params: dict[str, Any]) -> str:
    document = params.get("textDocument")
    uri = document.get("uri") if isinstance(document, dict) else None
    if not isinstance(uri, str):
        raise RequestError(-32602, "params.textDocument.uri must be a string")
    return uri


def _at(workspace: Workspace, params: dict[str, Any]) -> tuple[str, Any, int, int]:
    """Return a request's URI, analysis and 1-based code-point position (the position checked first)."""
    uri = _uri(params)
    line, col = workspace.lines(uri).from_lsp(params.get("position"))
    return uri, workspace.analysis(uri), line, col


def hover(workspace: Workspace, params: dict[str, Any]) -> Any:
    """textDocument/hover: Markdown about the name under the cursor."""
    from hpdsl.lsp.hover import hover as render

    _, analysis, line, col = _at(workspace, params)
    text = render(analysis, line, col)
    return None if text is None else {"contents": {"kind": "markdown", "value": text}}


def definition(workspace: Workspace, params: dict[str, Any]) -> Any:
    """textDocument/definition: where the name or import under the cursor is declared."""
    from hpdsl.lsp.definition import definition as find
    from hpdsl.lsp.diagnostics import Ranges

    _, analysis, line, col = _at(workspace, params)
    place = find(analysis, line, col)
    if place is None:
        return None
    return {"uri": workspace.uri_for(place.path), "range": Ranges(analysis, workspace.encoding).of(place.span)}


def completion(workspace: Workspace, params: dict[str, Any]) -> Any:
    """textDocument/completion: what may be written at the cursor."""
    from hpdsl.lsp.completion import complete

    uri, analysis, line, col = _at(workspace, params)
    items = complete(analysis, workspace.text(uri), line, col)
    return {"isIncomplete": False, "items": [
        {"label": i.label, "kind": _COMPLETION_KINDS.get(i.kind, 1), **({"detail": i.detail} if i.detail else {})}
        for i in items]}


def document_symbols(workspace: Workspace, params: dict[str, Any]) -> Any:
    """textDocument/documentSymbol: the document's declarations, nested."""
    from hpdsl.lsp.diagnostics import Ranges
    from hpdsl.lsp.symbols import Symbol, symbols

    analysis = workspace.analysis(_uri(params))
    ranges = Ranges(analysis, workspace.encoding)

    def convert(symbol: Symbol) -> dict[str, Any]:
        return {"name": symbol.name, "kind": _SYMBOL_KINDS[symbol.kind], "detail": symbol.kind,
                "range": ranges.of(symbol.span), "selectionRange": ranges.of(symbol.name_span),
                "children": [convert(c) for c in symbol.children]}

    return [convert(s) for s in symbols(analysis)]


def formatting(workspace: Workspace, params: dict[str, Any]) -> Any:
    """textDocument/formatting: one edit to the canonical text (none when it is canonical or does not parse)."""
    from hpdsl.lsp.formatting import formatted

    uri = _uri(params)
    text = workspace.text(uri)
    canonical = formatted(str(path_of(uri)), text)
    if canonical is None:
        return []
    lines = text.split("\n")
    end = {"line": len(lines) - 1, "character": units(lines[-1], len(lines[-1]), workspace.encoding)}
    return [{"range": {"start": {"line": 0, "character": 0}, "end": end}, "newText": canonical}]


def _edits(workspace: Workspace, edits: list[Any], texts: dict[Path, str]) -> dict[str, list[dict[str, Any]]]:
    changes: dict[str, list[dict[str, Any]]] = {}
    lines: dict[Path, Lines] = {}
    for edit in edits:
        found = lines.setdefault(edit.path, Lines.of(texts.get(edit.path, ""), workspace.encoding))
        span = edit.span
        changes.setdefault(workspace.uri_for(edit.path), []).append(
            {"range": span_range(found, span.line, span.col, span.end_line, span.end_col), "newText": edit.text})
    return changes


def rename(workspace: Workspace, params: dict[str, Any]) -> Any:
    """textDocument/rename: every place the workspace names the kind or profile, renamed."""
    from hpdsl.lsp.rename import RenameError, rename as plan, workspace_texts

    _, analysis, line, col = _at(workspace, params)
    new_name = params.get("newName")
    if not isinstance(new_name, str):
        raise RequestError(-32602, "params.newName must be a string")
    texts = workspace_texts(workspace.root, workspace.open_texts())
    try:
        edits = plan(analysis, line, col, new_name, texts)
    except RenameError as refused:
        raise RequestError(-32803, str(refused)) from None
    return {"changes": _edits(workspace, edits, texts)}


def prepare_rename(workspace: Workspace, params: dict[str, Any]) -> Any:
    """textDocument/prepareRename: the range of the renamable name under the cursor, or why not."""
    from hpdsl.lsp.diagnostics import Ranges
    from hpdsl.lsp.rename import RenameError, renamable

    _, analysis, line, col = _at(workspace, params)
    try:
        occurrence = renamable(analysis, line, col)
    except RenameError as refused:
        raise RequestError(-32803, str(refused)) from None
    span = occurrence.name.span
    return {"range": Ranges(analysis, workspace.encoding).of(span), "placeholder": str(occurrence.name.value)}


def references(workspace: Workspace, params: dict[str, Any]) -> Any:
    """textDocument/references: every name in the workspace, its imports and the library that means the same."""
    from hpdsl.lsp.rename import references as find, workspace_texts

    _, analysis, line, col = _at(workspace, params)
    texts = {analysis.paths.get(name, Path(name)): text for name, text in analysis.texts.items()}
    texts.update(workspace_texts(workspace.root, workspace.open_texts()))
    context = params.get("context")
    declaration = not isinstance(context, dict) or context.get("includeDeclaration") is not False
    edits = find(analysis, line, col, texts, declaration=declaration)
    return [{"uri": uri, "range": edit["range"]}
            for uri, found in _edits(workspace, edits, texts).items() for edit in found]


def code_action(workspace: Workspace, params: dict[str, Any]) -> Any:
    """textDocument/codeAction: quick fixes from the hints of the diagnostics in the range."""
    from hpdsl.lsp.actions import quick_fixes

    uri = _uri(params)
    lines = workspace.lines(uri)
    wanted = params.get("range")
    if not isinstance(wanted, dict):
        raise RequestError(-32602, "params.range must be a range")
    start, end = lines.from_lsp(wanted.get("start")), lines.from_lsp(wanted.get("end"))
    return quick_fixes(workspace.analysis(uri), uri, start, end, workspace.encoding)


def did_open(workspace: Workspace, params: dict[str, Any]) -> None:
    """textDocument/didOpen: keep the buffer and check it."""
    document = params.get("textDocument")
    if not isinstance(document, dict) or not isinstance(document.get("text"), str):
        raise RequestError(-32602, "params.textDocument.text must be a string")
    version = document.get("version")
    workspace.open(_uri(params), document["text"], version if isinstance(version, int) else None)


def did_change(workspace: Workspace, params: dict[str, Any]) -> None:
    """textDocument/didChange: apply the edits; the check waits for a pause."""
    changes = params.get("contentChanges")
    if not isinstance(changes, list):
        raise RequestError(-32602, "params.contentChanges must be a list")
    version = params["textDocument"].get("version") if isinstance(params.get("textDocument"), dict) else None
    workspace.change(_uri(params), changes, version if isinstance(version, int) else None)


def did_close(workspace: Workspace, params: dict[str, Any]) -> None:
    """textDocument/didClose: forget the buffer."""
    workspace.close(_uri(params))


def did_change_watched_files(workspace: Workspace, params: dict[str, Any]) -> None:
    """workspace/didChangeWatchedFiles: re-check the open documents that import what changed on disk."""
    changes = params.get("changes")
    for change in changes if isinstance(changes, list) else ():
        if isinstance(change, dict) and isinstance(change.get("uri"), str):
            workspace.disk_changed(change["uri"], change.get("type") in (1, 3))


REQUESTS: dict[str, Callable[[Workspace, dict[str, Any]], Any]] = {
    "textDocument/hover": hover, "textDocument/definition": definition,
    "textDocument/completion": completion, "textDocument/documentSymbol": document_symbols,
    "textDocument/formatting": formatting, "textDocument/rename": rename,
    "textDocument/prepareRename": prepare_rename, "textDocument/references": references,
    "textDocument/codeAction": code_action,
}
NOTIFICATIONS: dict[str, Callable[[Workspace, dict[str, Any]], None]] = {
    "textDocument/didOpen": did_open, "textDocument/didChange": did_change,
    "textDocument/didClose": did_close, "workspace/didChangeWatchedFiles": did_change_watched_files,
}
