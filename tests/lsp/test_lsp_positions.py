"""Positions in the negotiated encoding: UTF-16 by default, UTF-8 when the client prefers it, both ways.

Emoji are astral characters: one code point, two UTF-16 units, four UTF-8 bytes,
so every column after one on its line differs between the encodings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, strategies as st

from hpdsl.lsp.positions import Lines, negotiate, points, units
from lsp_client import Client

EMOJI = "\U0001F600"
FAMILY = f'family f {{ factory "m:{EMOJI}{EMOJI}" parallel tq }}\n'
PROFILE = (f'profile mine {{ model_types "{EMOJI}{EMOJI}" default mixer\n'
           "  kind mixer { ops { attMM 1  attBMM 1  ffMM 1  softmax 1  dropout 1  normOp 1  gather 1 } } }\n")


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def start(path: Path, text: str, capabilities: dict[str, Any] | None = None) -> tuple[Client, str, dict[str, Any]]:
    client = Client(path.parent)
    result = client.request("initialize", {"processId": None, "rootUri": path.parent.as_uri(),
                                           "capabilities": capabilities or {}})
    path.write_text(text)
    client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "hpdsl",
                                                            "version": 1, "text": text}})
    return client, path.as_uri(), result


def at(uri: str, line: int, character: int) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def test_an_emoji_line_s_diagnostic_starts_at_the_utf16_column(tmp_path: Path) -> None:
    client, uri, result = start(tmp_path / "f.hpf", FAMILY)
    try:
        assert result["capabilities"]["positionEncoding"] == "utf-16"
        [axis] = [d for d in client.diagnostics(uri) if d["code"] == "unknown-axis"]
        column = utf16(FAMILY[:FAMILY.index("tq")])
        assert axis["range"] == {"start": {"line": 0, "character": column},
                                 "end": {"line": 0, "character": column + 2}}
        # an edit sent in UTF-16 units lands on `tq` and fixes it
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                                 "contentChanges": [{"range": axis["range"], "text": "tp"}]})
        published = client.published(uri)
        assert published["version"] == 2
        assert not [d for d in published["diagnostics"] if d["code"] == "unknown-axis"]
    finally:
        client.close()


def test_a_client_that_prefers_utf8_gets_byte_columns(tmp_path: Path) -> None:
    capabilities = {"general": {"positionEncodings": ["utf-8", "utf-16"]}}
    client, uri, result = start(tmp_path / "f.hpf", FAMILY, capabilities)
    try:
        assert result["capabilities"]["positionEncoding"] == "utf-8"
        [axis] = [d for d in client.diagnostics(uri) if d["code"] == "unknown-axis"]
        column = len(FAMILY[:FAMILY.index("tq")].encode())
        assert axis["range"]["start"] == {"line": 0, "character": column}
    finally:
        client.close()


def test_hover_definition_and_rename_after_emoji(tmp_path: Path) -> None:
    client, uri, _ = start(tmp_path / "p.hpf", PROFILE)
    try:
        client.diagnostics(uri)
        column = utf16(PROFILE[:PROFILE.index("default mixer")]) + len("default ")
        hover = client.request("textDocument/hover", at(uri, 0, column + 2))
        assert "**kind mixer**" in hover["contents"]["value"]
        location = client.request("textDocument/definition", at(uri, 0, column + 2))
        assert location["range"]["start"] == {"line": 1, "character": 7}
        edit = client.request("textDocument/rename", {**at(uri, 0, column), "newName": "blend"})
        starts = sorted((e["range"]["start"]["line"], e["range"]["start"]["character"])
                        for e in edit["changes"][uri])
        assert starts == [(0, column), (1, 7)]
        prepared = client.request("textDocument/prepareRename", at(uri, 0, column + 1))
        assert prepared["range"]["start"] == {"line": 0, "character": column}
        assert prepared["placeholder"] == "mixer"
    finally:
        client.close()


def test_an_unexpected_emoji_is_covered_whole(tmp_path: Path) -> None:
    text = f"model tiny : llama2 {{ hidden 64 {EMOJI} }}\n"
    client, uri, _ = start(tmp_path / "t.hpf", text)
    try:
        [found] = client.diagnostics(uri)
        assert found["code"] == "unexpected-character"
        column = utf16(text[:text.index(EMOJI)])
        assert found["range"] == {"start": {"line": 0, "character": column},
                                  "end": {"line": 0, "character": column + 2}}
        # a position inside the pair (its second half) is the emoji's start
        assert client.call("textDocument/hover", at(uri, 0, column + 1))["result"] is None
    finally:
        client.close()


def test_negotiation() -> None:
    assert negotiate({}) == "utf-16"
    assert negotiate({"general": {"positionEncodings": ["utf-8"]}}) == "utf-8"
    assert negotiate({"general": {"positionEncodings": ["utf-16", "utf-8"]}}) == "utf-16"
    assert negotiate({"general": {"positionEncodings": ["ebcdic", "utf-32"]}}) == "utf-32"
    assert negotiate({"general": {"positionEncodings": "utf-8"}}) == "utf-16"
    assert negotiate(None) == "utf-16"


@given(st.text(), st.sampled_from(["utf-16", "utf-8", "utf-32"]))
def test_units_and_points_round_trip(line: str, encoding: str) -> None:
    line = line.replace("\n", "")
    codec = {"utf-16": "utf-16-le", "utf-8": "utf-8", "utf-32": "utf-32-le"}[encoding]
    size = {"utf-16": 2, "utf-8": 1, "utf-32": 4}[encoding]
    for index in range(len(line) + 1):
        try:
            expected = len(line[:index].encode(codec)) // size
        except UnicodeEncodeError:
            return  # a lone surrogate: the server replaces those before it counts
        assert units(line, index, encoding) == expected
        assert points(line, expected, encoding) == index
    assert points(line, 10**9, encoding) == len(line)


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"])), st.integers(0, 50), st.integers(0, 50))
def test_offsets_stay_in_the_text(text: str, line: int, character: int) -> None:
    lines = Lines.of(text)
    offset = lines.offset({"line": line, "character": character})
    assert 0 <= offset <= len(text)
