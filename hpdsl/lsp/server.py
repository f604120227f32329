"""The pygls server: LSP requests into the feature modules, their answers into lsprotocol types.

Documents are re-checked on open and on every change (the whole document, with
its imports and the standard library: the checker is fast enough for files of
the size specs have); the latest analysis of each open document answers hover,
definition, completion and symbols.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from hpdsl.lsp.analysis import Analysis, analyse
from hpdsl.lsp.completion import complete
from hpdsl.lsp.definition import definition
from hpdsl.lsp.diagnostics import document_diagnostics, to_range
from hpdsl.lsp.formatting import formatted
from hpdsl.lsp.hover import hover
from hpdsl.lsp.rename import RenameError, rename, workspace_texts
from hpdsl.lsp.symbols import Symbol, symbols

_COMPLETION_KINDS = {"keyword": lsp.CompletionItemKind.Keyword,
                     "field": lsp.CompletionItemKind.Field,
                     "slot": lsp.CompletionItemKind.Property,
                     "family": lsp.CompletionItemKind.Module,
                     "profile": lsp.CompletionItemKind.Module,
                     "kind": lsp.CompletionItemKind.Class,
                     "op": lsp.CompletionItemKind.Constant,
                     "selector": lsp.CompletionItemKind.Variable}
_SYMBOL_KINDS = {"profile": lsp.SymbolKind.Namespace, "family": lsp.SymbolKind.Module,
                 "model": lsp.SymbolKind.Struct, "kind": lsp.SymbolKind.Class,
                 "selector": lsp.SymbolKind.Variable, "variant": lsp.SymbolKind.EnumMember}


class HpdslServer(LanguageServer):
    """A language server that keeps the latest analysis of each open document."""

    def __init__(self) -> None:
        import hpdsl

        super().__init__("hpdsl", hpdsl.__version__)
        self.analyses: dict[str, Analysis] = {}

    def refresh(self, uri: str) -> Analysis:
        """Re-check a document and publish its diagnostics."""
        text = self.workspace.get_text_document(uri).source
        analysis = analyse(path_of(uri), text)
        self.analyses[uri] = analysis
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, diagnostics=document_diagnostics(analysis)))
        return analysis

    def analysis(self, uri: str) -> Analysis:
        """Return the latest analysis of a document (checking it if it has none)."""
        return self.analyses.get(uri) or self.refresh(uri)


def path_of(uri: str) -> Path:
    """Return the file a `file://` URI names."""
    return Path(unquote(urlparse(uri).path)).resolve()


def create_server() -> HpdslServer:
    """Return the server with every feature registered."""
    server = HpdslServer()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: HpdslServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.refresh(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: HpdslServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.refresh(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: HpdslServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.analyses.pop(params.text_document.uri, None)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: HpdslServer, params: lsp.HoverParams) -> lsp.Hover | None:
        line, col = params.position.line + 1, params.position.character + 1
        text = hover(ls.analysis(params.text_document.uri), line, col)
        if text is None:
            return None
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text))

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def on_definition(ls: HpdslServer, params: lsp.DefinitionParams) -> lsp.Location | None:
        line, col = params.position.line + 1, params.position.character + 1
        place = definition(ls.analysis(params.text_document.uri), line, col)
        if place is None:
            return None
        return lsp.Location(uri=place.path.as_uri(), range=to_range(place.span))

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION,
                    lsp.CompletionOptions(trigger_characters=[" ", "{", ":", "["]))
    def on_completion(ls: HpdslServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        uri = params.text_document.uri
        text = ls.workspace.get_text_document(uri).source
        items = complete(ls.analysis(uri), text, params.position.line + 1,
                         params.position.character + 1)
        return lsp.CompletionList(is_incomplete=False, items=[
            lsp.CompletionItem(label=i.label, kind=_COMPLETION_KINDS.get(i.kind), detail=i.detail or None)
            for i in items])

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def on_symbols(ls: HpdslServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        return [_symbol(s) for s in symbols(ls.analysis(params.text_document.uri))]

    @server.feature(lsp.TEXT_DOCUMENT_RENAME)
    def on_rename(ls: HpdslServer, params: lsp.RenameParams) -> lsp.WorkspaceEdit:
        line, col = params.position.line + 1, params.position.character + 1
        open_documents = {path_of(uri): doc.source for uri, doc in ls.workspace.text_documents.items()}
        root = Path(ls.workspace.root_path) if ls.workspace.root_path else None
        try:
            edits = rename(ls.analysis(params.text_document.uri), line, col, params.new_name,
                           workspace_texts(root, open_documents))
        except RenameError as refused:
            raise JsonRpcInvalidParams(str(refused)) from None
        changes: dict[str, list[lsp.TextEdit]] = {}
        for edit in edits:
            changes.setdefault(edit.path.as_uri(), []).append(
                lsp.TextEdit(range=to_range(edit.span), new_text=edit.text))
        ls.analyses.clear()  # every open analysis may name what was renamed
        return lsp.WorkspaceEdit(changes=changes)

    @server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
    def on_format(ls: HpdslServer, params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit]:
        document = ls.workspace.get_text_document(params.text_document.uri)
        text = formatted(str(path_of(document.uri)), document.source)
        if text is None:
            return []
        lines = document.source.split("\n")
        whole = lsp.Range(start=lsp.Position(line=0, character=0),
                          end=lsp.Position(line=len(lines), character=0))
        return [lsp.TextEdit(range=whole, new_text=text)]

    return server


def _symbol(symbol: Symbol) -> lsp.DocumentSymbol:
    return lsp.DocumentSymbol(name=symbol.name, kind=_SYMBOL_KINDS[symbol.kind],
                              range=to_range(symbol.span), selection_range=to_range(symbol.name_span),
                              detail=symbol.kind, children=[_symbol(c) for c in symbol.children])


def serve() -> None:
    """Run the server over stdin and stdout until the client exits it."""
    create_server().start_io()
