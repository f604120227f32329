"""`hpdsl lsp` driven over stdio with raw JSON-RPC: diagnostics as you type, hover, definition, completion."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lsp_client import Client

pytest.importorskip("pygls")

REPO = Path(__file__).resolve().parent.parent
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
