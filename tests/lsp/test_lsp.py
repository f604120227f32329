"""`hpdsl lsp` driven over stdio with raw JSON-RPC: diagnostics as you type, hover, definition, completion."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lsp_client import Client

REPO = Path(__file__).resolve().parents[2]
LLAMA = (REPO / "examples/llama3_8b.hpf").read_text()

# Line 2 (0-based 1) names a profile nobody declares, at characters 15..28.
BROKEN = """\
// a model of an unknown profile
model tiny : no_such_one {
  hidden 64  layers 2  heads 4  vocab 100  ffn_width 128
}
"""
FIXED = BROKEN.replace("no_such_one", "llama2")

# A profile of our own, so that go-to-definition lands in this document; the kind
# `mixer` is used by `from` on line 5 and by the model's stack on line 12.
SPEC = """\
import "other.hpf"
profile mine {
  kind mixer { ops { attMM 1  attBMM 1  ffMM 1  softmax 1  dropout 1  normOp 1  gather 1 } }
  default mixer
  kind second from mixer { }
}
model small : mine {
  hidden 64
  layers 2
  heads 4
  vocab 100
  stack [mixer, second]
  moe {
    
  }
}
"""


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    client = Client(tmp_path)
    client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(),
                                  "capabilities": {}})
    client.notify("initialized", {})
    yield client
    client.close()


def open_document(client: Client, path: Path, text: str) -> str:
    path.write_text(text)
    uri = path.as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "hpdsl", "version": 1, "text": text}})
    return uri


def at(uri: str, line: int, character: int) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def test_diagnostics_as_you_type(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "tiny.hpf", BROKEN)
    diagnostics = client.diagnostics(uri)
    assert len(diagnostics) == 1
    [found] = diagnostics
    assert found["code"] == "unknown-profile" and found["source"] == "hpdsl"
    assert found["severity"] == 1
    assert found["range"] == {"start": {"line": 1, "character": 13},
                              "end": {"line": 1, "character": 24}}
    assert "hint: expected one of" in found["message"]
    client.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": found["range"], "text": "llama2"}]})
    assert client.diagnostics(uri) == []


def test_hover_over_a_model_shows_its_exact_parameter_count(client: Client, tmp_path: Path) -> None:
    from hpdsl.api import bind_model
    from hpdsl.cost import parameters

    path = tmp_path / "llama3_8b.hpf"
    uri = open_document(client, path, LLAMA)
    assert client.diagnostics(uri) == []
    line = next(i for i, text in enumerate(LLAMA.split("\n")) if text.startswith("model "))
    hover = client.request("textDocument/hover", at(uri, line, len("model ") + 2))
    counts = parameters(bind_model([path]))
    assert f"{int(counts.total):,} total" in hover["contents"]["value"]
    assert f"active per token: {int(counts.active):,}" in hover["contents"]["value"]
    assert "decoder x 32" in hover["contents"]["value"]
    field = client.request("textDocument/hover", at(uri, line + 1, 3))
    assert "hidden size" in field["contents"]["value"]


def test_definition_of_a_kind_and_an_import(client: Client, tmp_path: Path) -> None:
    (tmp_path / "other.hpf").write_text("// nothing\n")
    uri = open_document(client, tmp_path / "spec.hpf", SPEC)
    client.diagnostics(uri)
    declared = {"start": {"line": 2, "character": 7}, "end": {"line": 2, "character": 12}}
    for line, character in ((4, 20), (11, 10), (3, 11)):  # `from mixer`, the stack, `default mixer`
        location = client.request("textDocument/definition", at(uri, line, character))
        assert location == {"uri": uri, "range": declared}
    imported = client.request("textDocument/definition", at(uri, 0, 10))
    assert imported["uri"] == (tmp_path / "other.hpf").as_uri()
    profile = client.request("textDocument/definition", at(uri, 6, 15))
    assert profile["range"]["start"] == {"line": 1, "character": 8}


def test_definition_into_the_standard_library(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "tiny.hpf", FIXED)
    client.diagnostics(uri)
    location = client.request("textDocument/definition", at(uri, 1, 15))
    assert location["uri"] == (REPO / "profiles/llama2.hpf").as_uri()


def test_completion_inside_moe_offers_its_fields(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "spec.hpf", SPEC)
    client.diagnostics(uri)
    labels = {i["label"] for i in client.request("textDocument/completion", at(uri, 13, 4))["items"]}
    assert {"experts", "top_k", "expert_width", "shared_experts", "router_bias"} <= labels
    assert "hidden" not in labels
    in_model = {i["label"] for i in client.request("textDocument/completion", at(uri, 8, 2))["items"]}
    assert {"hidden", "kv_heads", "moe", "stack"} <= in_model
    in_stack = {i["label"] for i in client.request("textDocument/completion", at(uri, 11, 9))["items"]}
    assert {"mixer", "second"} <= in_stack
    in_ops = {i["label"] for i in client.request("textDocument/completion", at(uri, 2, 21))["items"]}
    assert {"attMM", "ffMM", "gather"} <= in_ops


def test_symbols_and_formatting(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "tiny.hpf", "model tiny : llama2 { hidden 64 layers 2 "
                        "heads 4 vocab 100 ffn_width 128 }\n")
    client.diagnostics(uri)
    [symbol] = client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert symbol["name"] == "tiny" and symbol["detail"] == "model"
    [edit] = client.request("textDocument/formatting", {"textDocument": {"uri": uri},
                                                         "options": {"tabSize": 2,
                                                                     "insertSpaces": True}})
    assert edit["newText"].startswith("model tiny : llama2 {\n")


USER = """\
import "spec.hpf"
model other : mine {
  hidden 64  layers 3  heads 4  vocab 100  layer_norms 1
  stack [mixer, second, mixer]
}
"""


def _raw_request(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    client.next_id += 1
    ident = client.next_id
    client.send({"id": ident, "method": method, "params": params})
    return client.wait(lambda m: m.get("id") == ident and "method" not in m)


def _edited(changes: dict[str, list[dict[str, Any]]], uri: str) -> list[tuple[int, int, str]]:
    return sorted((e["range"]["start"]["line"], e["range"]["start"]["character"], e["newText"])
                  for e in changes.get(uri, []))


def test_rename_a_kind_across_the_workspace(client: Client, tmp_path: Path) -> None:
    (tmp_path / "other.hpf").write_text("// nothing\n")
    (tmp_path / "user.hpf").write_text(USER)  # on disk, not open: found in the workspace
    uri = open_document(client, tmp_path / "spec.hpf", SPEC)
    client.diagnostics(uri)
    edit = client.request("textDocument/rename", {**at(uri, 2, 8), "newName": "block"})
    changes = edit["changes"]
    # the declaration, `default`, `from` and the stack of this document; both stack entries of the other file
    assert _edited(changes, uri) == [(2, 7, "block"), (3, 10, "block"), (4, 19, "block"), (11, 9, "block")]
    assert _edited(changes, (tmp_path / "user.hpf").as_uri()) == [(3, 9, "block"), (3, 24, "block")]


def test_rename_a_profile_and_the_refusals(client: Client, tmp_path: Path) -> None:
    (tmp_path / "other.hpf").write_text("// nothing\n")
    (tmp_path / "user.hpf").write_text(USER)
    uri = open_document(client, tmp_path / "spec.hpf", SPEC)
    client.diagnostics(uri)
    changes = client.request("textDocument/rename", {**at(uri, 6, 15), "newName": "ours"})["changes"]
    assert _edited(changes, uri) == [(1, 8, "ours"), (6, 14, "ours")]
    assert _edited(changes, (tmp_path / "user.hpf").as_uri()) == [(1, 14, "ours")]
    bad = _raw_request(client, "textDocument/rename", {**at(uri, 2, 8), "newName": "2nd"})
    assert "is not a name" in bad["error"]["message"]
    taken = _raw_request(client, "textDocument/rename", {**at(uri, 2, 8), "newName": "second"})
    assert "already exists" in taken["error"]["message"]
    llama = open_document(client, tmp_path / "llama.hpf", LLAMA)
    client.diagnostics(llama)
    line = next(i for i, text in enumerate(LLAMA.splitlines()) if text.startswith("model "))
    column = LLAMA.splitlines()[line].index("llama2") + 1
    stdlib = _raw_request(client, "textDocument/rename", {**at(llama, line, column), "newName": "mine2"})
    assert "standard library" in stdlib["error"]["message"]
