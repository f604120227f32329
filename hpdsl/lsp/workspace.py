"""The server's model of the workspace: open buffers over the disk, each document's import closure, pending checks.

An open document's text is the editor's; any other file is read from disk
through hpdsl's safe reader (hpdsl/files.py: regular files only, at most
MAX_FILE_BYTES, never blocking on a FIFO), for every request. A document is
checked with the open buffers its imports reach in place of their files
(hpdsl/lsp/analysis.py). After a check, the diagnostics of every user file in
its closure are published (an open file publishes its own); a file that leaves
every closure is cleared. An edit, or a file changed on disk, marks the open
documents whose closure holds it for a re-check.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import attrs

from hpdsl.files import read_text, reason
from hpdsl.lsp.positions import Lines

MAX_FILE_BYTES = 1 << 18
"""The largest document read or checked: the loader's own cap (hpdsl/loader.py MAX_FILE_BYTES)."""

DEBOUNCE = 0.03
"""Seconds an edited document waits, without newer messages, before it is checked."""

_UNOPENED_KEPT = 16

Publish = Callable[[str, list[dict[str, Any]], "int | None"], None]


class RequestError(Exception):
    """A request the server answers with a JSON-RPC error (code and message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@attrs.frozen
class Document:
    """An open buffer: its URI, text and version."""

    uri: str
    text: str
    version: int | None

    def changed(self, changes: list[Any], version: int | None, encoding: str) -> Document:
        """Return the document with LSP content changes applied in order."""
        text = self.text
        for change in changes:
            if not isinstance(change, dict) or not isinstance(change.get("text"), str):
                raise RequestError(-32602, "a content change is an object with a 'text' string")
            if "range" not in change:
                text = clean(change["text"])
                continue
            span = change["range"]
            if not isinstance(span, dict):
                raise RequestError(-32602, "a content change's range is an object")
            lines = Lines.of(text, encoding)
            start, end = lines.offset(span.get("start")), lines.offset(span.get("end"))
            text = text[:start] + clean(change["text"]) + text[max(start, end):]
        return attrs.evolve(self, text=text, version=version)


def clean(text: str) -> str:
    """Return a client's text with lone surrogates (which JSON can carry, UTF-8 cannot) replaced by U+FFFD."""
    if text.isascii():
        return text
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def path_of(uri: Any) -> Path:
    """Return the file a `file://` URI names; raise RequestError for anything else."""
    if not isinstance(uri, str):
        raise RequestError(-32602, "a document URI is a string")
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise RequestError(-32602, f"only file:// URIs name files, not {uri[:200]!r}")
    try:
        return Path(unquote(parsed.path)).resolve()
    except (OSError, ValueError, RuntimeError) as error:
        raise RequestError(-32602, f"{uri[:200]!r} is not a usable path ({error})") from None


def uri_of(path: Path) -> str:
    """Return the `file://` URI of an absolute path."""
    return path.as_uri()


class Workspace:
    """Open documents, analyses, pending checks and what has been published."""

    def __init__(self, publish: Publish, latest: dict[str, int]) -> None:
        self.publish = publish
        self.latest = latest
        self.encoding = "utf-16"
        self.root: Path | None = None
        self.documents: dict[str, Document] = {}
        self.analyses: dict[str, Any] = {}
        self.unopened: dict[str, tuple[str, Any]] = {}
        self.due: dict[str, float] = {}
        self.closures: dict[str, set[Path]] = {}
        self.shown: dict[str, set[str]] = {}

    def start(self, params: dict[str, Any], encoding: str) -> None:
        """Take the client's root folder and the negotiated encoding from `initialize`."""
        self.encoding = encoding
        folders = params.get("workspaceFolders")
        candidates = [params.get("rootUri")]
        if isinstance(folders, list) and folders and isinstance(folders[0], dict):
            candidates.insert(0, folders[0].get("uri"))
        for candidate in candidates:
            try:
                self.root = path_of(candidate)
                return
            except RequestError:
                continue
        if isinstance(params.get("rootPath"), str):
            self.root = Path(params["rootPath"])

    # ---------------------------------------------------------------- buffers

    def open(self, uri: str, text: str, version: int | None) -> None:
        """Open a buffer and check it at once."""
        path_of(uri)
        self.documents[uri] = Document(uri, clean(text), version)
        self.unopened.pop(uri, None)
        self.latest.pop(uri, None)  # a version noted before a close is not this buffer's
        self.due[uri] = time.monotonic()
        self._dependents_due(uri)

    def change(self, uri: str, changes: list[Any], version: int | None) -> None:
        """Apply edits to an open buffer; its check waits for a pause."""
        document = self.documents.get(uri)
        if document is None:
            raise RequestError(-32602, f"{uri[:200]!r} is not open")
        self.documents[uri] = document.changed(changes, version, self.encoding)
        self.due[uri] = time.monotonic() + DEBOUNCE

    def close(self, uri: str) -> None:
        """Close a buffer: its file is the disk's again for the documents that import it."""
        self.documents.pop(uri, None)
        self.analyses.pop(uri, None)
        self.due.pop(uri, None)
        self.closures.pop(uri, None)
        self._dependents_due(uri)
        self._retract(uri, set())

    def disk_changed(self, uri: str, created_or_deleted: bool) -> None:
        """Note a file changed on disk: re-check the open documents that import it (all, if it came or went)."""
        self.unopened.pop(uri, None)
        now = time.monotonic()
        for document in self.documents:
            if created_or_deleted or (uri != document and self._imports(document, uri)):
                self.due[document] = now

    def _imports(self, document: str, uri: str) -> bool:
        try:
            return path_of(uri) in self.closures.get(document, set())
        except RequestError:
            return False

    def _dependents_due(self, uri: str) -> None:
        now = time.monotonic()
        for other in self.documents:
            if other != uri and self._imports(other, uri):
                self.due[other] = now

    # ---------------------------------------------------------------- checks

    def next_due(self) -> float | None:
        """Return when the next pending check is due (None if none is)."""
        return min(self.due.values()) if self.due else None

    def check_due(self, interrupted: Callable[[], bool]) -> None:
        """Check the documents whose time has come, stopping early when a message waits."""
        from hpdsl.lsp.analysis import Superseded

        now = time.monotonic()
        for uri in sorted((u for u, t in self.due.items() if t <= now), key=self.due.__getitem__):
            if interrupted():
                return
            if uri not in self.documents:
                self.due.pop(uri, None)
                continue
            try:
                self.check(uri, superseded=self._overtaken(uri, self.documents[uri].version))
            except Superseded:
                continue  # the newer edit has set its own time
            except Exception:  # noqa: BLE001  (a check's bug must not stop the server; the log has it)
                self.due.pop(uri, None)
                log_error(f"internal error checking {uri[:200]}")
                continue
            self._dependents_due(uri)

    def _overtaken(self, uri: str, version: int | None) -> Callable[[], bool]:
        """Return whether a newer edit of the document has arrived (the reader notes versions as they come)."""
        return lambda: self.latest.get(uri, version) != version

    def check(self, uri: str, superseded: Callable[[], bool] = lambda: False) -> Any:
        """Check an open document now, publish its closure's diagnostics, and return the analysis."""
        from hpdsl.lsp.analysis import analyse
        from hpdsl.lsp.diagnostics import per_file

        document = self.documents[uri]
        self.due.pop(uri, None)
        path = path_of(uri)
        if len(document.text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
            self.analyses[uri] = analysis = analyse(path, "")
            self.publish(uri, [_too_large()], document.version)
            return analysis
        overlay = {path_of(u): d.text for u, d in self.documents.items() if u != uri}
        analysis = analyse(path, document.text, overlay, superseded)
        self.analyses[uri] = analysis
        published = per_file(analysis, self.encoding)
        shown = set()
        for file, diagnostics in published.items():
            target = uri if file == path else self.uri_for(file)
            if target != uri and target in self.documents:
                continue  # an open file publishes its own
            self.publish(target, diagnostics, document.version if target == uri else None)
            self.shown.setdefault(target, set()).add(uri)
            shown.add(target)
        self.closures[uri] = set(published)
        self._retract(uri, shown)
        return analysis

    def _retract(self, owner: str, keep: set[str]) -> None:
        """Clear the files `owner` published before but no longer does, if nothing else shows them."""
        for target, owners in list(self.shown.items()):
            if owner in owners and target not in keep:
                owners.discard(owner)
                if not owners:
                    del self.shown[target]
                    if target not in self.documents or target == owner:
                        self.publish(target, [], None)

    # ---------------------------------------------------------------- for requests

    def text(self, uri: Any) -> str:
        """Return a document's text: the buffer if open, else the file read safely from disk."""
        document = self.documents.get(uri) if isinstance(uri, str) else None
        if document is not None:
            return document.text
        return read_file(path_of(uri))

    def analysis(self, uri: Any) -> Any:
        """Return the up-to-date analysis of a document, open or not (checking it if needed)."""
        if isinstance(uri, str) and uri in self.documents:
            if uri in self.due or uri not in self.analyses:
                return self.check(uri)
            return self.analyses[uri]
        from hpdsl.lsp.analysis import analyse

        text = self.text(uri)
        kept = self.unopened.get(uri)
        if kept is not None and kept[0] == text:
            return kept[1]
        overlay = {path_of(u): d.text for u, d in self.documents.items()}
        analysis = analyse(path_of(uri), text, overlay)
        if len(self.unopened) >= _UNOPENED_KEPT:
            self.unopened.pop(next(iter(self.unopened)))
        self.unopened[uri] = (text, analysis)
        return analysis

    def uri_for(self, path: Path) -> str:
        """Return the URI to name a file by: the client's own for an open buffer (it may quote differently)."""
        for uri in self.documents:
            try:
                if path_of(uri) == path:
                    return uri
            except RequestError:
                continue
        return uri_of(path)

    def lines(self, uri: Any) -> Lines:
        """Return a document's lines in the negotiated encoding."""
        return Lines.of(self.text(uri), self.encoding)

    def open_texts(self) -> dict[Path, str]:
        """Return every open buffer's text by its file."""
        out = {}
        for uri, document in self.documents.items():
            try:
                out[path_of(uri)] = document.text
            except RequestError:
                continue
        return out


def log_error(what: str) -> None:
    """Write what failed and its traceback to the server's log (stderr)."""
    import sys
    import traceback

    try:
        print(f"hpdsl lsp: {what}:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def read_file(path: Path) -> str:
    """Read a file the server was asked about, safely; raise RequestError saying why it cannot be."""
    try:
        return read_text(path, limit=MAX_FILE_BYTES)
    except (OSError, UnicodeDecodeError) as error:
        raise RequestError(-32803, f"cannot read '{os.fspath(path)[:200]}': {reason(error)}") from None


def _too_large() -> dict[str, Any]:
    return {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
            "severity": 1, "source": "hpdsl", "code": "file-too-large",
            "message": f"not checked: the document is larger than {MAX_FILE_BYTES // 1024} KiB"}
