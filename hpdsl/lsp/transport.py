"""LSP base protocol framing: bytes on a stream into JSON-RPC messages, and back.

A message is a header block (`Name: value` lines, then an empty line) and a
body of exactly Content-Length bytes. A block without a numeric Content-Length,
one over MAX_BODY, or a body that is not a JSON object cannot be answered as a
request, so it is reported as a `Malformed` item (the server answers it with a
JSON-RPC error whose id is null) and the reader re-synchronises at the next
`Content-Length:` header instead of reading later messages as part of the bad
one (or at a `Content-Length:` inside the bad block, where the rest of a
message whose length was short runs into the next header). The reader never holds more than MAX_BODY + one header block in memory.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any, BinaryIO

import attrs

MAX_BODY = 16 << 20
"""The largest message body read: a whole 256 KiB spec, JSON-escaped, is far below it."""

MAX_HEADER = 8192
"""The longest header block: real clients send one or two short lines."""

_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d{1,12})[ \t]*$", re.IGNORECASE)
_RESYNC = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)


@attrs.frozen
class Malformed:
    """A frame that is not a JSON-RPC message, with why (the server answers it with an error)."""

    reason: str
    code: int = -32700  # ParseError; InvalidRequest (-32600) for JSON that is not a message


class Reader:
    """Read framed messages from a binary stream (the server's stdin)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.buffer = b""
        self.closed = False
        self.lost = False  # after a bad frame: skip to the next header before reading on
        self.skip = False  # ... unless the buffer already starts at one

    def _fill(self) -> bool:
        """Read more bytes into the buffer; return False at the end of the stream."""
        if self.closed:
            return False
        try:
            chunk = os.read(self.stream.fileno(), 65536)
        except (OSError, ValueError):
            chunk = b""
        if not chunk:
            self.closed = True
            return False
        self.buffer += chunk
        return True

    def read(self) -> dict[str, Any] | list[Any] | Malformed | None:
        """Return the next message (a dict, or a list for a batch), a Malformed, or None at the end."""
        if self.lost:
            self._resync()
            self.lost = False
        header = self._header_block()
        if header is None:
            return None
        if isinstance(header, Malformed):
            self.lost = not self.skip  # re-synchronised at the next read, so this error is answered first
            self.skip = False
            return header
        body = self._exactly(header)
        if body is None:
            return None
        return _decode(body)

    def _header_block(self) -> list[bytes] | Malformed | None:
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end >= 0:
                block, self.buffer = self.buffer[:end], self.buffer[end + 4:]
                found = _length(block)
                inner = _RESYNC.search(block, 1) if isinstance(found, Malformed) else None
                if inner is not None:
                    # the rest of a broken message ran into the next header: read on from that header
                    self.buffer = block[inner.start():] + b"\r\n\r\n" + self.buffer
                    self.skip = True
                return found
            if len(self.buffer) > MAX_HEADER:
                self.buffer = self.buffer[-16:]  # keep a possible start of the next header
                return Malformed(f"a header block longer than {MAX_HEADER} bytes")
            if not self._fill():
                rest, self.buffer = self.buffer, b""
                return Malformed("the stream ended inside a header") if rest.strip() else None

    def _exactly(self, header: Any) -> bytes | None:
        length = int(header)
        while len(self.buffer) < length:
            if not self._fill():
                return None
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return body

    def _resync(self) -> None:
        """Drop bytes up to the next Content-Length header (the start of the next good message)."""
        while True:
            found = _RESYNC.search(self.buffer)
            if found is not None:
                self.buffer = self.buffer[found.start():]
                return
            self.buffer = self.buffer[-32:]
            if not self._fill():
                return


def _length(block: bytes) -> Any:
    """Return the Content-Length of a header block (as text), or a Malformed saying what is wrong."""
    lengths = [m.group(1) for line in block.split(b"\r\n") if (m := _LENGTH.match(line.strip()))]
    if not lengths:
        return Malformed("a header block without a numeric Content-Length")
    if int(lengths[-1]) > MAX_BODY:
        return Malformed(f"a Content-Length of {int(lengths[-1]):,} bytes, over the {MAX_BODY:,} read")
    return lengths[-1].decode()


def _decode(body: bytes) -> dict[str, Any] | list[Any] | Malformed:
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return Malformed("a body that is not UTF-8 JSON")
    if isinstance(message, (dict, list)):
        return message
    return Malformed("a JSON body that is not an object", -32600)


class Writer:
    """Write framed messages to a binary stream (the server's stdout), one at a time."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def write(self, message: dict[str, Any]) -> None:
        """Frame and write one message; a closed stream is ignored (the client has gone)."""
        # ASCII JSON: a lone surrogate a client sent (JSON allows "\\ud800") stays writable.
        body = json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")).encode("ascii")
        with self.lock:
            try:
                self.stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                self.stream.flush()
            except (OSError, ValueError):
                pass
