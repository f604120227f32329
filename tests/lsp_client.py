"""A raw JSON-RPC LSP client over a real `hpdsl lsp` subprocess (no pygls on this side)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class Client:
    """Start `python -m hpdsl lsp`, send requests and notifications, collect what comes back."""

    def __init__(self, cwd: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen([sys.executable, "-m", "hpdsl", "lsp"], cwd=cwd, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.log: list[str] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_log, daemon=True).start()

    def _read_log(self) -> None:
        """Keep the server's stderr (its log), so a chatty server never blocks on a full pipe."""
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line.decode(errors="replace"))

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            headers: dict[str, str] = {}
            while (line := stream.readline().decode()) not in ("\r\n", ""):
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
            if not headers:
                return
            self.messages.put(json.loads(stream.read(int(headers["content-length"]))))

    def send(self, message: dict[str, Any]) -> None:
        """Write one framed JSON-RPC message."""
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.send_bytes(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes to the server (for frames no well-behaved client sends)."""
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def call(self, method: str, params: Any, timeout: float = 60) -> dict[str, Any]:
        """Send a request and return its whole response (`result` or `error`)."""
        self.next_id += 1
        ident = self.next_id
        self.send({"id": ident, "method": method, "params": params})
        return self.wait(lambda m: m.get("id") == ident and "method" not in m, timeout)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification."""
        self.send({"method": method, "params": params})

    def request(self, method: str, params: dict[str, Any], timeout: float = 60) -> Any:
        """Send a request and return its result (other messages met meanwhile are kept)."""
        response = self.call(method, params, timeout)
        assert "result" in response, response
        return response["result"]

    def wait(self, match: Any, timeout: float = 60) -> dict[str, Any]:
        """Return the first message that `match` accepts, keeping the others for later waits."""
        skipped = []
        try:
            while True:
                message = self.messages.get(timeout=timeout)
                if match(message):
                    return message
                skipped.append(message)
        finally:
            for message in skipped:
                self.messages.put(message)

    def diagnostics(self, uri: str, timeout: float = 60) -> list[dict[str, Any]]:
        """Return the next diagnostics published for `uri`."""
        return self.published(uri, timeout)["diagnostics"]

    def published(self, uri: str, timeout: float = 60) -> dict[str, Any]:
        """Return the next publishDiagnostics params for `uri` (with its version)."""
        message = self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                            and m["params"]["uri"] == uri, timeout)
        params: dict[str, Any] = message["params"]
        return params

    def drain(self) -> list[dict[str, Any]]:
        """Return and forget every message received so far."""
        out = []
        while not self.messages.empty():
            out.append(self.messages.get())
        return out

    def close(self) -> None:
        """Shut the server down as a client does; kill it if it does not exit."""
        try:
            self.request("shutdown", {}, timeout=10)
            self.notify("exit", {})
            self.process.wait(timeout=10)
        finally:
            if self.process.poll() is None:
                self.process.kill()
