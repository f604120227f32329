"""Hostile input to `hpdsl lsp`: every request is answered (or the server exits cleanly) within seconds.

Files are read through hpdsl's safe reader whether open or not (a FIFO or a link
to /dev/zero is refused, not waited on or read forever); invalid positions and
malformed frames get JSON-RPC errors; errors carry no traceback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lsp_client import Client

QUICK = 10  # seconds: every answer here comes well within it
SPEC = "model tiny : llama2 {\n  hidden 64  layers 2  heads 4  vocab 100  ffn_width 128\n}\n"


def at(uri: str, line: int, character: int) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def no_traceback(response: dict[str, Any]) -> dict[str, Any]:
    assert "error" in response, response
    assert "Traceback" not in str(response) and "File \"" not in str(response)
    return response["error"]


def still_answers(client: Client, tmp_path: Path) -> None:
    """The server answers a good request after whatever came before."""
    path = tmp_path / "good.hpf"
    path.write_text(SPEC)
    hover = client.request("textDocument/hover", at(path.as_uri(), 0, 7), timeout=QUICK)
    assert "model tiny" in hover["contents"]["value"]


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "pipe.hpf"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.hpf"
    zero.symlink_to("/dev/zero")
    return {"fifo": fifo, "zero": zero}


METHODS = ("textDocument/hover", "textDocument/completion", "textDocument/formatting",
           "textDocument/definition", "textDocument/documentSymbol", "textDocument/references",
           "textDocument/prepareRename", "textDocument/codeAction")


def test_an_unopened_fifo_or_dev_zero_is_refused(client: Client, tmp_path: Path, hostile: dict[str, Path]) -> None:
    for which, path in hostile.items():
        for method in METHODS:
            params = {**at(path.as_uri(), 0, 0), "options": {"tabSize": 2, "insertSpaces": True},
                      "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                      "context": {"diagnostics": []}}
            error = no_traceback(client.call(method, params, timeout=QUICK))
            assert "cannot read" in error["message"], (method, error)
            assert ("a FIFO" if which == "fifo" else "a device") in error["message"]
    still_answers(client, tmp_path)


def test_rename_skips_fifos_and_dev_zero_in_the_workspace(client: Client, tmp_path: Path,
                                                          hostile: dict[str, Path]) -> None:
    (tmp_path / "deep").mkdir()
    os.mkfifo(tmp_path / "deep" / "also.hpf")
    path = tmp_path / "mine.hpf"
    text = "profile mine {\n  kind k { ops { attMM 1 } }\n  default k\n}\n"
    path.write_text(text)
    client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "hpdsl",
                                                            "version": 1, "text": text}})
    edit = client.request("textDocument/rename", {**at(path.as_uri(), 0, 9), "newName": "ours"}, timeout=QUICK)
    assert list(edit["changes"]) == [path.as_uri()]


POSITIONS = ({"line": -1, "character": 0}, {"line": 0, "character": 2**31}, {"line": 0, "character": -5},
             {"line": 2**40, "character": 0}, {"line": 99, "character": 0}, {"line": "0", "character": 0},
             {"line": 0}, {"line": 0, "character": 1.5}, {"line": True, "character": 0}, None, [0, 0])


def test_invalid_positions_get_an_error(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "good.hpf"
    path.write_text(SPEC)
    for position in POSITIONS:
        for method in ("textDocument/hover", "textDocument/definition", "textDocument/completion",
                       "textDocument/references", "textDocument/prepareRename"):
            params = {"textDocument": {"uri": path.as_uri()}, "position": position}
            error = no_traceback(client.call(method, params, timeout=QUICK))
            assert error["code"] == -32602, (method, position, error)
    still_answers(client, tmp_path)


def test_a_character_past_the_line_end_is_the_line_end(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "good.hpf"
    path.write_text(SPEC)
    assert client.call("textDocument/hover", at(path.as_uri(), 0, 2**31 - 1), timeout=QUICK)["result"] is None


FRAMES = (
    b"X-Garbage: yes\r\n\r\n{\"jsonrpc\": \"2.0\", \"id\": 99, \"method\": \"shutdown\"}",
    b"Content-Length: twelve\r\n\r\n{}",
    b"Content-Length: 99999999999\r\n\r\n",
    b"Content-Length: 5\r\n\r\nhello",
    b"Content-Length: 2\r\n\r\n[]",
    b"Content-Length: 4\r\n\r\n\"hi\"",
    b"Content-Length: 4\r\n\r\n\xff\xfe{}",
    b"Content-Length: 30\r\n\r\n" + b"[" * 30,
    b"\r\n\r\n",
    # a short length: the rest of the body runs into the next message's header, which is still read
    b"Content-Length: 10\r\n\r\n{\"jsonrpc\": \"2.0\"}",
)


def test_malformed_frames_get_an_error_and_the_next_message_is_read(client: Client, tmp_path: Path) -> None:
    for frame in FRAMES:
        client.send_bytes(frame)
        response = client.wait(lambda m: "error" in m and m.get("id") is None, timeout=QUICK)
        assert response["error"]["code"] in (-32700, -32600), frame
        still_answers(client, tmp_path)
    assert client.process.poll() is None  # the shutdown inside the bad frame was not obeyed


def test_requests_before_initialize_and_unknown_methods(tmp_path: Path) -> None:
    client = Client(tmp_path)
    try:
        early = no_traceback(client.call("textDocument/hover", {}, timeout=QUICK))
        assert early["code"] == -32002
        client.request("initialize", {"processId": None, "capabilities": {}}, timeout=QUICK)
        unknown = no_traceback(client.call("textDocument/noSuchThing", {}, timeout=QUICK))
        assert unknown["code"] == -32601
        odd: list[Any] = [None, [], {"textDocument": 3}, {"textDocument": {"uri": "http://example.com/x"}}]
        for params in odd:
            no_traceback(client.call("textDocument/hover", params, timeout=QUICK))
    finally:
        client.close()


def test_end_of_input_is_a_clean_exit(tmp_path: Path) -> None:
    client = Client(tmp_path)
    client.request("initialize", {"processId": None, "capabilities": {}}, timeout=QUICK)
    assert client.process.stdin is not None
    client.process.stdin.close()
    assert client.process.wait(timeout=QUICK) == 1  # no shutdown before the end: exit 1, as LSP says
    assert any("stdin closed" in line for line in client.log)


def test_a_burst_of_a_thousand_edits_is_answered_within_a_second(client: Client, tmp_path: Path) -> None:
    import time

    path = tmp_path / "good.hpf"
    path.write_text(SPEC)
    uri = path.as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "hpdsl", "version": 1,
                                                            "text": SPEC}})
    assert client.diagnostics(uri, timeout=QUICK) == []
    for version in range(2, 1002):
        digit = str(version % 10)
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": 1, "character": 10},
                                          "end": {"line": 1, "character": 11}}, "text": digit}]})
    last = time.monotonic()
    hover = client.request("textDocument/hover", at(uri, 0, 7), timeout=QUICK)
    assert time.monotonic() - last < 1.0
    assert "model tiny" in hover["contents"]["value"]
    published = [m["params"] for m in client.drain() if m.get("method") == "textDocument/publishDiagnostics"]
    assert len(published) < 20  # coalesced, not one check per edit
    assert published[-1]["version"] == 1001
