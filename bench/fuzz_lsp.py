"""The `lsp` fuzz target: an in-process language server fed random JSON-RPC.

One server per fuzz process (hpdsl/lsp/server.py, its real reader and writer on
a pair of pipes, its loop in a thread) takes each input: a few frames, each a
well-formed message with random method, URI and position, an edit burst on an
open document, or a broken frame (no numeric Content-Length, a short length,
garbage, not JSON). URIs name good specs, fuzzed specs (bench/fuzz_inputs.py),
a FIFO, a link to /dev/zero, a folder, missing files and other schemes. After
the input a ping request is sent; the input is done when its answer comes.

A finding (bench/fuzz.py raises it as the campaign's finding) is: a request
with no response or two, a response that is an internal error (-32603) or
carries a traceback, an internal error in the server's log, a diagnostic range
that ends before it starts, the server thread gone, or no ping answer within
PING_SECONDS (a wedged server, rebuilt for the next input).
"""

from __future__ import annotations

import json
import os
import queue
import random
import tempfile
import threading
from pathlib import Path
from typing import Any

from fuzz_inputs import hpf_input
from fuzz_targets import LAST, Finding

import hpdsl.lsp.server as server_module
import hpdsl.lsp.workspace as workspace_module
from hpdsl.lsp.features import NOTIFICATIONS, REQUESTS

PING_SECONDS = 20.0
GOOD = "model tiny : llama2 {\n  hidden 64  layers 2  heads 4  vocab 100  ffn_width 128\n}\n"
ODD_TEXT = ["", "\U0001F600", "\ud800", "\u00e9\u20ac", "\r\n", "\t", "{", "}", "// x\n", "hidden 64", "\x00"]


class _Log:
    """What the server wrote to its log, for the internal-error rule."""

    lines: list[str] = []

    @classmethod
    def write(cls, text: str) -> None:
        cls.lines.append(text)


def _log(text: str) -> None:
    _Log.write(text)


def _log_error(what: str) -> None:
    import traceback

    _Log.write(f"internal error: {what}\n{traceback.format_exc()}")


server_module.log = _log  # the server's own log lines, kept instead of printed
workspace_module.log_error = _log_error


class Harness:
    """A running in-process server and the messages it sent back."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="hpdsl-fuzz-lsp-"))
        self.files = _files(self.folder)
        to_server, self.input = os.pipe()
        self.output, from_server = os.pipe()
        self.server = server_module.Server(os.fdopen(to_server, "rb"), os.fdopen(from_server, "wb"))
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="fuzz-lsp-server")
        self.thread.start()
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._collect, daemon=True, name="fuzz-lsp-client").start()
        self.next_id = 0
        self.send(_frame({"id": "init", "method": "initialize",
                          "params": {"rootUri": self.folder.as_uri(), "capabilities": {}}}))
        self.wait_for("init")

    def _collect(self) -> None:
        from hpdsl.lsp.transport import Reader

        reader = Reader(os.fdopen(self.output, "rb"))
        while True:
            message = reader.read()
            if message is None:
                return
            if isinstance(message, dict):
                self.replies.put(message)

    def send(self, data: bytes) -> None:
        """Write bytes to the server's stdin."""
        view = memoryview(data)
        while view:
            view = view[os.write(self.input, view):]

    def wait_for(self, ident: Any) -> list[dict[str, Any]]:
        """Return every message up to the response to `ident` (raise Finding if it does not come)."""
        seen = []
        while True:
            try:
                message = self.replies.get(timeout=PING_SECONDS)
            except queue.Empty:
                raise Finding(f"hang: no answer to request {ident!r} within {PING_SECONDS} s") from None
            seen.append(message)
            if message.get("id") == ident and "method" not in message:
                return seen


def _files(folder: Path) -> dict[str, str]:
    (folder / "good.hpf").write_text(GOOD)
    (folder / "sub").mkdir()
    (folder / "sub" / "user.hpf").write_text('import "../good.hpf"\n' + GOOD.replace("tiny", "other"))
    os.mkfifo(folder / "pipe.hpf")
    (folder / "zero.hpf").symlink_to("/dev/zero")
    (folder / "folder.hpf").mkdir()
    return {"good": (folder / "good.hpf").as_uri(), "user": (folder / "sub" / "user.hpf").as_uri(),
            "pipe": (folder / "pipe.hpf").as_uri(), "zero": (folder / "zero.hpf").as_uri(),
            "folder": (folder / "folder.hpf").as_uri(), "missing": (folder / "nope.hpf").as_uri(),
            "fuzzed": (folder / "fuzzed.hpf").as_uri(), "nul": (folder / "a%00b.hpf").as_uri(),
            "http": "http://example.invalid/x.hpf", "untitled": "untitled:Untitled-1", "empty": "",
            "relative": "file:relative.hpf"}


_HARNESS: dict[int, Harness] = {}


def harness() -> Harness:
    """Return this process's server (a new one after a fork, or after a finding stopped the last)."""
    found = _HARNESS.get(os.getpid())
    if found is None or not found.thread.is_alive():
        found = _HARNESS[os.getpid()] = Harness()
    return found


def _frame(message: Any) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message} if isinstance(message, dict) else message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _number(rng: random.Random) -> Any:
    return rng.choice([0, 1, 2, 3, 5, 40, -1, 2**31 - 1, 2**31, 2**63, -(2**40), 1.5, "1", None, True, [], {}])


def _position(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.6:
        return {"line": rng.randint(0, 5), "character": rng.randint(0, 60)}
    if roll < 0.9:
        return {"line": _number(rng), "character": _number(rng)}
    return rng.choice([None, [], "0:0", {"line": 0}, {}])


def _range(rng: random.Random) -> Any:
    return {"start": _position(rng), "end": _position(rng)} if rng.random() < 0.9 else rng.choice([None, 3, {}])


def _uri(rng: random.Random, h: Harness) -> Any:
    return h.files[rng.choice(list(h.files))] if rng.random() < 0.95 else _number(rng)


def _params(rng: random.Random, h: Harness, method: str) -> Any:
    if rng.random() < 0.05:
        return rng.choice([None, [], 7, "x"])
    uri = _uri(rng, h)
    params: dict[str, Any] = {"textDocument": {"uri": uri, "version": rng.randint(0, 50), "languageId": "hpdsl",
                                               "text": _text(rng)},
                              "position": _position(rng), "range": _range(rng), "newName": rng.choice(
                                  ["ours", "2nd", "", "a" * 300, "mixer", None]),
                              "context": {"diagnostics": [], "includeDeclaration": rng.random() < 0.5},
                              "options": {"tabSize": 2, "insertSpaces": True}}
    if method == "textDocument/didChange":
        params["contentChanges"] = [_change(rng) for _ in range(rng.randint(0, 4))]
    if method == "workspace/didChangeWatchedFiles":
        params["changes"] = [{"uri": _uri(rng, h), "type": rng.choice([1, 2, 3, 9, None])}
                             for _ in range(rng.randint(0, 3))]
    for key in rng.sample(list(params), rng.randint(0, 2)):
        del params[key]
    return params


def _text(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.5:
        return hpf_input(rng)[1]
    if roll < 0.8:
        return GOOD
    return rng.choice(ODD_TEXT) * rng.randint(1, 3) if rng.random() < 0.9 else _number(rng)


def _change(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.7:
        return {"range": _range(rng), "text": rng.choice(ODD_TEXT + ["layers 3", "tp", "llama2"])}
    if roll < 0.9:
        return {"text": _text(rng)}
    return rng.choice([None, {}, {"range": _range(rng)}, "text"])


def _message(rng: random.Random, h: Harness, expected: list[Any]) -> bytes:
    methods = [*REQUESTS, *NOTIFICATIONS, "$/cancelRequest", "textDocument/noSuch", "initialize"]
    method = rng.choice(methods)
    message: dict[str, Any] = {"method": method, "params": _params(rng, h, method)}
    if method == "$/cancelRequest":
        message["params"] = {"id": h.next_id + 1}
    if method in REQUESTS or method in ("textDocument/noSuch", "initialize") or rng.random() < 0.05:
        h.next_id += 1
        message["id"] = h.next_id
        expected.append(h.next_id)
    return _frame(message)


def _broken(rng: random.Random) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "method": "textDocument/hover", "params": {}}).encode()
    return rng.choice([
        b"X-Nothing: 1\r\n\r\n" + body,
        b"Content-Length: abc\r\n\r\n" + body,
        b"Content-Length: %d\r\n\r\n" % max(0, len(body) - rng.randint(1, 20)) + body,
        b"Content-Length: 99999999999999\r\n\r\n",
        b"\r\n\r\n",
        bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + b"\r\n\r\n",
        b"Content-Length: 3\r\n\r\n[1]",
        b"Content-Length: 4\r\n\r\nnull",
        b"Content-Length: 6\r\n\r\n\xff\xfe\xfd{}\x00",
    ])


def _burst(rng: random.Random, h: Harness) -> bytes:
    uri = h.files[rng.choice(["good", "user", "fuzzed"])]
    out = _frame({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "hpdsl", "version": 1, "text": _text(rng) if rng.random() < 0.5 else GOOD}}})
    for version in range(2, rng.randint(3, 300)):
        out += _frame({"method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [_change(rng)]}})
    return out


def lsp_target(rng: random.Random) -> None:
    """Feed one random exchange to the in-process server: every request answered, no internal error, in time."""
    h = harness()
    expected: list[Any] = []
    parts: list[bytes] = []
    for _ in range(rng.randint(1, 6)):
        roll = rng.random()
        parts.append(_broken(rng) if roll < 0.15 else _burst(rng, h) if roll < 0.25 else _message(rng, h, expected))
    LAST["input"] = [part.decode("utf-8", "replace")[:4000] for part in parts]
    _Log.lines.clear()
    for part in parts:
        h.send(part)
    h.next_id += 1
    ping = h.next_id
    # closing what the input opened keeps the next input's workspace small
    closes = b"".join(_frame({"method": "textDocument/didClose", "params": {"textDocument": {"uri": u}}})
                      for u in h.files.values())
    h.send(closes + _frame({"id": ping, "method": "$/fuzz/ping", "params": {}}))
    try:
        seen = h.wait_for(ping)
    except Finding:
        _HARNESS.pop(os.getpid(), None)  # wedged: the next input gets a new server
        raise
    _judge(seen, expected, h)


def _judge(seen: list[dict[str, Any]], expected: list[Any], h: Harness) -> None:
    answered = [m.get("id") for m in seen if "method" not in m and m.get("id") is not None]
    for ident in expected:
        if answered.count(ident) != 1:
            raise Finding(f"request {ident} got {answered.count(ident)} responses")
    for message in seen:
        error = message.get("error")
        if isinstance(error, dict) and (error.get("code") == -32603 or "Traceback" in str(error)):
            raise Finding(f"internal error response: {error}\n{''.join(_Log.lines)[-3000:]}")
        if message.get("method") == "textDocument/publishDiagnostics":
            for diagnostic in message["params"]["diagnostics"]:
                start, end = diagnostic["range"]["start"], diagnostic["range"]["end"]
                if (end["line"], end["character"]) < (start["line"], start["character"]):
                    raise Finding(f"a diagnostic range ends before it starts: {diagnostic}")
    internal = [line for line in _Log.lines if "internal error" in line]
    if internal:
        raise Finding("internal error in the log:\n" + internal[0][-3000:])
    if not h.thread.is_alive():
        raise Finding("the server thread stopped")


__all__ = ["lsp_target"]
