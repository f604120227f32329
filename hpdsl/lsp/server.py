"""The language server: JSON-RPC over stdio, a workspace of open documents, checks debounced and dropped when stale.

A reader thread turns stdin into messages (hpdsl/lsp/transport.py) and notes,
as they arrive, cancellations and each document's newest version; the main
thread applies them in order. Edits are applied at once, but a document is
checked only after DEBOUNCE seconds (hpdsl/lsp/workspace.py) without a message (so a burst of edits is
one check), or at once when a request needs its analysis; a check that a newer
edit overtakes is dropped between phases (hpdsl/lsp/analysis.py). After a
document is checked, the open documents that import it are checked too.
Diagnostics are published for every user file of a document's import closure
(hpdsl/lsp/diagnostics.py), with the open document's version.

Every request is answered: with its result, or a JSON-RPC error whose message
says what was wrong (a bad position, a file that cannot be read); an internal
error's traceback goes to stderr (the client's log), never into the response.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO

from hpdsl.lsp.positions import BadPosition, negotiate
from hpdsl.lsp.transport import Malformed, Reader, Writer
from hpdsl.lsp.workspace import RequestError, Workspace

_NOT_INITIALIZED, _READY, _SHUT_DOWN = "not initialized", "ready", "shut down"


class Server:
    """One client's session: its messages in order, its workspace, its pending checks."""

    def __init__(self, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.reader = Reader(stdin)
        self.writer = Writer(stdout)
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.cancelled: set[Any] = set()
        self.latest: dict[str, int] = {}
        self.state = _NOT_INITIALIZED
        self.workspace = Workspace(self.publish, self.latest)
        self.exit_code: int | None = None
        self.warm = False
        self.capabilities: dict[str, Any] = {}

    # ---------------------------------------------------------------- reading

    def _read(self) -> None:
        """Read messages into the inbox (noting cancellations and versions at once) until the end."""
        while True:
            message = self.reader.read()
            if message is None:
                self.inbox.put(None)
                return
            if isinstance(message, dict):
                self._note(message)
            self.inbox.put(message)

    def _note(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        if not isinstance(params, dict):
            return
        if message.get("method") == "$/cancelRequest":
            if len(self.cancelled) > 10_000:  # cancellations of requests long answered: forget them
                self.cancelled.clear()
            self.cancelled.add(_hashable(params.get("id")))
        elif message.get("method") == "textDocument/didChange":
            document = params.get("textDocument")
            if isinstance(document, dict) and isinstance(document.get("version"), int) \
                    and isinstance(document.get("uri"), str):
                self.latest[document["uri"]] = document["version"]

    # ---------------------------------------------------------------- the loop

    def run(self) -> int:
        """Serve until `exit` or the end of stdin; return the process's exit code."""
        threading.Thread(target=self._read, daemon=True, name="hpdsl-lsp-reader").start()
        while self.exit_code is None:
            due = self.workspace.next_due()
            timeout = None if due is None else max(0.0, due - time.monotonic())
            if not self.warm and self.state == _READY and self.inbox.empty():
                warm_up()
                self.warm = True
                continue
            try:
                message = self.inbox.get(timeout=timeout)
            except queue.Empty:
                self.workspace.check_due(lambda: not self.inbox.empty())
                continue
            if message is None:
                log("stdin closed; exiting")
                return 0 if self.state == _SHUT_DOWN else 1
            self.handle(message)
        return self.exit_code

    def handle(self, message: Any) -> None:
        """Answer one message (a request gets exactly one response)."""
        if isinstance(message, Malformed):
            log(f"dropped {message.reason}")
            self.writer.write({"id": None, "error": {"code": message.code, "message": message.reason}})
            return
        if not isinstance(message, dict) or not isinstance(message.get("method", ""), str):
            self.writer.write({"id": None, "error": {"code": -32600, "message": "not a JSON-RPC request"}})
            return
        if "method" not in message:
            return  # a response to a request of ours (the server sends none that need one)
        ident = message.get("id")
        if "id" in message and (not isinstance(ident, (int, str)) or isinstance(ident, bool)):
            self.writer.write({"id": None, "error": {"code": -32600, "message": "a request id is a number or a string"}})
            return
        if "id" in message:
            self._request(ident, message["method"], message.get("params"))
        else:
            self._notification(message["method"], message.get("params"))

    def _request(self, ident: Any, method: str, params: Any) -> None:
        if _hashable(ident) in self.cancelled:
            self.cancelled.discard(_hashable(ident))
            self._error(ident, -32800, "the request was cancelled")
            return
        try:
            result = self._answer(method, params)
        except RequestError as error:
            self._error(ident, error.code, error.message)
        except BadPosition as error:
            self._error(ident, -32602, str(error))
        except Exception as error:  # noqa: BLE001  (every request is answered; the traceback is logged)
            log(f"internal error in {method}:\n{traceback.format_exc()}")
            self._error(ident, -32603, f"internal error in {method}: {type(error).__name__} (see the server log)")
        else:
            self.writer.write({"id": ident, "result": result})

    def _answer(self, method: str, params: Any) -> Any:
        if method == "initialize":
            return self._initialize(params)
        if self.state == _NOT_INITIALIZED:
            raise RequestError(-32002, f"'{method}' before 'initialize'")
        if self.state == _SHUT_DOWN:
            raise RequestError(-32600, f"'{method}' after 'shutdown'")
        if method == "shutdown":
            self.state = _SHUT_DOWN
            return None
        from hpdsl.lsp.features import REQUESTS

        handler = REQUESTS.get(method)
        if handler is None:
            raise RequestError(-32601, f"the server does not handle '{method}'")
        if not isinstance(params, dict):
            raise RequestError(-32602, f"'{method}' needs its params object")
        return handler(self.workspace, params)

    def _initialize(self, params: Any) -> dict[str, Any]:
        import hpdsl
        from hpdsl.lsp.features import capabilities

        if self.state != _NOT_INITIALIZED:
            raise RequestError(-32600, "'initialize' was already sent")
        params = params if isinstance(params, dict) else {}
        self.capabilities = params.get("capabilities") if isinstance(params.get("capabilities"), dict) else {}
        encoding = negotiate(self.capabilities)
        self.workspace.start(params, encoding)
        self.state = _READY
        return {"capabilities": capabilities(encoding),
                "serverInfo": {"name": "hpdsl", "version": hpdsl.__version__}}

    def _notification(self, method: str, params: Any) -> None:
        if method == "exit":
            self.exit_code = 0 if self.state == _SHUT_DOWN else 1
            return
        if self.state != _READY or not isinstance(params, dict):
            return
        if method == "initialized":
            self._watch_files()
            return
        from hpdsl.lsp.features import NOTIFICATIONS

        handler = NOTIFICATIONS.get(method)
        if handler is None:
            return
        try:
            handler(self.workspace, params)
        except (RequestError, BadPosition) as error:
            log(f"ignored {method}: {error}")
        except Exception:  # noqa: BLE001  (a notification has no response; the log says why)
            log(f"internal error in {method}:\n{traceback.format_exc()}")

    def _watch_files(self) -> None:
        """Ask a client that can watch files for us to report changes to *.hpf (workspace/didChangeWatchedFiles)."""
        workspace = self.capabilities.get("workspace")
        watched = workspace.get("didChangeWatchedFiles") if isinstance(workspace, dict) else None
        if isinstance(watched, dict) and watched.get("dynamicRegistration") is True:
            self.writer.write({"id": "hpdsl-watch-hpf", "method": "client/registerCapability", "params": {
                "registrations": [{"id": "hpdsl-watch-hpf", "method": "workspace/didChangeWatchedFiles",
                                   "registerOptions": {"watchers": [{"globPattern": "**/*.hpf"}]}}]}})

    # ---------------------------------------------------------------- writing

    def publish(self, uri: str, diagnostics: list[dict[str, Any]], version: int | None) -> None:
        """Send one file's diagnostics (with the open document's version)."""
        params: dict[str, Any] = {"uri": uri, "diagnostics": diagnostics}
        if version is not None:
            params["version"] = version
        self.writer.write({"method": "textDocument/publishDiagnostics", "params": params})

    def _error(self, ident: Any, code: int, message: str) -> None:
        self.writer.write({"id": ident, "error": {"code": code, "message": message}})


def warm_up() -> None:
    """Import every feature and check an empty document once, while the client has nothing waiting.

    The first check and the first hover would otherwise pay for these imports
    (the checker, the standard library's parse, the parameter counter).
    """
    from pathlib import Path

    try:
        import hpdsl.lsp.actions  # noqa: F401
        import hpdsl.lsp.completion  # noqa: F401
        import hpdsl.lsp.definition  # noqa: F401
        import hpdsl.lsp.formatting  # noqa: F401
        import hpdsl.lsp.hover  # noqa: F401
        import hpdsl.lsp.rename  # noqa: F401
        import hpdsl.lsp.symbols  # noqa: F401
        from hpdsl.bound.bind import bind  # noqa: F401
        from hpdsl.cost.facts.params import parameters  # noqa: F401
        from hpdsl.lsp.analysis import analyse

        analyse(Path.cwd() / "<warm-up>.hpf", "")
    except Exception:  # noqa: BLE001  (only a warm-up: the real requests report what is wrong)
        log(f"warm-up failed:\n{traceback.format_exc()}")


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (int, str)) else repr(value)


def log(text: str) -> None:
    """Write a line to the server's log (stderr, which LSP clients show as the server's output)."""
    try:
        print(f"hpdsl lsp: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def serve() -> int:
    """Run the server over stdin and stdout until the client exits it; return the exit code."""
    return Server(sys.stdin.buffer, sys.stdout.buffer).run()

