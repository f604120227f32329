"""Quick fixes, references, prepareRename and completion that knows its context, over the real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsp_client import Client

PROFILE = """\
profile mine {
  kind mixer {
    ops { attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }
  }
  default mixr
}
model small : mine {
  hidden 64  layers 2  heads 6  kv_heads 4  vocab 100  ffn_width 128
  stack [mixer, mixer]
}
"""
FAMILY = """\
family pick {
  factory "pkg.mod:Pick"
  parallel tp
  selector style: enum(fast, slow) = fast
  selector fused: bool = false
  variant base "pkg.mod:Base" default
  variant quick "pkg.mod:Quick" when 
}
"""


def open_document(client: Client, path: Path, text: str) -> str:
    path.write_text(text)
    client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "hpdsl",
                                                            "version": 1, "text": text}})
    return path.as_uri()


def at(uri: str, line: int, character: int) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def offset(text: str, position: dict[str, int]) -> int:
    """Return the string index of a UTF-16 position (the test's own conversion, not the server's)."""
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[:position["line"]])
    units = 0
    for index, char in enumerate(lines[position["line"]]):
        if units >= position["character"]:
            return start + index
        units += 2 if ord(char) > 0xFFFF else 1
    return start + len(lines[position["line"]])


def apply(text: str, edits: list[dict[str, Any]]) -> str:
    for edit in sorted(edits, key=lambda e: offset(text, e["range"]["start"]), reverse=True):
        text = text[:offset(text, edit["range"]["start"])] + edit["newText"] + text[offset(text, edit["range"]["end"]):]
    return text


def actions(client: Client, uri: str, diagnostic: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": diagnostic["range"], "context": {"diagnostics": [diagnostic]}})
    return found


def test_quick_fixes_apply_the_hints_and_the_result_checks_clean(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "mine.hpf", PROFILE)
    diagnostics = {d["code"]: d for d in client.diagnostics(uri)}
    assert set(diagnostics) == {"unknown-default-kind", "heads-not-divisible"}
    [rename] = actions(client, uri, diagnostics["unknown-default-kind"])
    assert rename["title"] == "Change to 'mixer'" and rename["kind"] == "quickfix" and rename["isPreferred"]
    divisors = actions(client, uri, diagnostics["heads-not-divisible"])
    assert [a["title"] for a in divisors] == [f"Set kv_heads to {n}" for n in (1, 2, 3, 6)]
    [preferred] = [a for a in divisors if a["isPreferred"]]
    assert preferred["title"] == "Set kv_heads to 3"
    fixed = apply(apply(PROFILE, rename["edit"]["changes"][uri]), preferred["edit"]["changes"][uri])
    assert "default mixer" in fixed and "kv_heads 3" in fixed
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"text": fixed}]})
    assert client.diagnostics(uri) == []


def test_a_missing_field_is_added_with_the_value_the_hint_states(client: Client, tmp_path: Path) -> None:
    text = "model tiny : llama2 {\n  hidden 64  layers 2  heads 4  vocab 100\n}\n"
    uri = open_document(client, tmp_path / "tiny.hpf", text)
    [missing] = client.diagnostics(uri)
    assert missing["code"] == "missing-field"
    [add] = actions(client, uri, missing)
    fixed = apply(text, add["edit"]["changes"][uri])
    assert fixed.splitlines()[2] == "  ffn_width 11008"
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"text": fixed}]})
    assert client.diagnostics(uri) == []


def test_references_and_prepare_rename(client: Client, tmp_path: Path) -> None:
    fixed = PROFILE.replace("mixr", "mixer").replace("kv_heads 4", "kv_heads 3")
    user = tmp_path / "user.hpf"
    user.write_text('import "mine.hpf"\nmodel other : mine {\n  hidden 64  layers 1  heads 4  vocab 100  ffn_width 128\n'
                    "  stack [mixer]\n}\n")
    uri = open_document(client, tmp_path / "mine.hpf", fixed)
    assert client.diagnostics(uri) == []
    found = client.request("textDocument/references", {**at(uri, 1, 8), "context": {"includeDeclaration": True}})
    places = sorted((Path(r["uri"][len("file://"):]).name, r["range"]["start"]["line"],
                     r["range"]["start"]["character"]) for r in found)
    assert places == [("mine.hpf", 1, 7), ("mine.hpf", 4, 10), ("mine.hpf", 8, 9), ("mine.hpf", 8, 16),
                      ("user.hpf", 3, 9)]
    without = client.request("textDocument/references", {**at(uri, 8, 9), "context": {"includeDeclaration": False}})
    assert len(without) == 4
    assert client.request("textDocument/prepareRename", at(uri, 6, 15))["placeholder"] == "mine"
    refused = client.call("textDocument/prepareRename", at(uri, 7, 3))  # a field is not renamable
    assert "only a kind or a profile" in refused["error"]["message"]


def labels(client: Client, uri: str, line: int, character: int) -> set[str]:
    return {i["label"] for i in client.request("textDocument/completion", at(uri, line, character))["items"]}


def test_completion_knows_its_context(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "pick.hpf", FAMILY)
    after_when = labels(client, uri, 6, len('  variant quick "pkg.mod:Quick" when '))
    assert {"tp", "cp", "ep", "pp", "not", "style", "fused"} <= after_when
    assert "factory" not in after_when and "hidden" not in after_when
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 6, "character": 37}, "end": {"line": 6, "character": 37}},
         "text": "style == "}]})
    assert labels(client, uri, 6, 46) == {"fast", "slow"}
    model = open_document(client, tmp_path / "m.hpf", "model m : llama2 {\n  norm \n  tie_embeddings \n}\n")
    assert labels(client, model, 1, 7) == {"rmsnorm", "layernorm"}
    assert labels(client, model, 2, 17) == {"true", "false"}
