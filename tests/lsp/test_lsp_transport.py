"""The framing reader: any byte stream ends in messages and Malformed items, never a hang or a loop."""

from __future__ import annotations

import json
import os

from hypothesis import given, strategies as st

from hpdsl.lsp.transport import Malformed, Reader


def read_all(data: bytes) -> list[object]:
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    reader = Reader(os.fdopen(read, "rb"))
    out = []
    for _ in range(len(data) + 2):  # each item consumes at least one byte, or ends the stream
        item = reader.read()
        if item is None:
            return out
        out.append(item)
    raise AssertionError("the reader did not reach the end of the stream")


def frame(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


GOOD = frame({"jsonrpc": "2.0", "id": 1, "method": "shutdown"})
PIECES = [GOOD, b"Content-Length: ", b"\r\n", b"\r\n\r\n", b"12", b"{}", b"x", b"\xff", b"Content-Type: a\r\n"]


@given(st.lists(st.sampled_from(PIECES) | st.binary(max_size=20), max_size=12))
def test_any_stream_ends(pieces: list[bytes]) -> None:
    items = read_all(b"".join(pieces))
    assert all(isinstance(i, (dict, list, Malformed)) for i in items)


@given(st.sampled_from(PIECES[1:]) | st.binary(max_size=40))
def test_a_good_message_after_garbage_is_read(garbage: bytes) -> None:
    items = read_all(garbage + b"\r\n\r\n" + GOOD)
    assert items[-1] == {"jsonrpc": "2.0", "id": 1, "method": "shutdown"}
