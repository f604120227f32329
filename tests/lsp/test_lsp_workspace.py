"""The workspace model: open buffers over the disk, diagnostics per file of the import closure, dependents re-checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsp_client import Client

PROFILE = """\
profile mine {
  kind mixer {
    ops { attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }
  }
  default mixer
}
"""
BROKEN_PROFILE = PROFILE.replace("default mixer", "default mixr")
MODEL = """\
import "base.hpf"
model small : mine {
  hidden 64  layers 2  heads 4  vocab 100  ffn_width 128
  stack [mixer, mixer]
}
"""


def open_document(client: Client, path: Path, text: str, version: int = 1) -> str:
    client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "hpdsl",
                                                            "version": version, "text": text}})
    return path.as_uri()


def at(uri: str, line: int, character: int) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def hover_text(client: Client, uri: str) -> str:
    return str(client.request("textDocument/hover", at(uri, 1, 7))["contents"]["value"])


def test_an_error_in_an_imported_file_is_published_for_it_and_at_the_import(client: Client, tmp_path: Path) -> None:
    (tmp_path / "base.hpf").write_text(BROKEN_PROFILE)
    uri = open_document(client, tmp_path / "model.hpf", MODEL)
    imported = client.published((tmp_path / "base.hpf").as_uri())
    assert [d["code"] for d in imported["diagnostics"]] == ["unknown-default-kind"]
    assert imported["diagnostics"][0]["range"]["start"] == {"line": 4, "character": 10}
    assert "version" not in imported  # not open: no version
    own = client.published(uri)
    assert own["version"] == 1
    [at_import] = own["diagnostics"]
    assert at_import["range"]["start"] == {"line": 0, "character": 0}
    assert "imported file has errors" in at_import["message"]
    assert at_import["relatedInformation"][0]["location"]["uri"] == (tmp_path / "base.hpf").as_uri()
    assert "not counted while the specs have errors" in hover_text(client, uri)


def test_an_unsaved_change_to_an_open_import_changes_the_dependent(client: Client, tmp_path: Path) -> None:
    base = tmp_path / "base.hpf"
    base.write_text(BROKEN_PROFILE)  # on disk: broken; the editor's buffer fixes it, unsaved
    uri = open_document(client, tmp_path / "model.hpf", MODEL)
    assert client.diagnostics(uri) != []
    assert client.diagnostics(base.as_uri()) != []
    base_uri = open_document(client, base, BROKEN_PROFILE)
    assert client.diagnostics(base_uri)
    client.published(uri)  # re-checked when its import opened
    client.notify("textDocument/didChange", {"textDocument": {"uri": base_uri, "version": 2},
                                             "contentChanges": [{"text": PROFILE}]})
    assert client.published(base_uri)["diagnostics"] == []
    assert client.published(uri)["diagnostics"] == []  # the dependent re-checked, with the buffer
    assert "total" in hover_text(client, uri)
    assert "ffMM 3" in client.request("textDocument/hover", at(uri, 3, 10))["contents"]["value"]
    # a change to the open import that alters the model's size shows in the dependent's hover
    client.notify("textDocument/didChange", {"textDocument": {"uri": base_uri, "version": 3},
                                             "contentChanges": [{"text": PROFILE.replace("ffMM 3", "ffMM 1")}]})
    client.published(uri)
    kind = client.request("textDocument/hover", at(uri, 3, 10))["contents"]["value"]
    assert "ffMM 1" in kind and "ffMM 3" not in kind
    assert base.read_text() == BROKEN_PROFILE  # nothing was saved
    client.notify("textDocument/didClose", {"textDocument": {"uri": base_uri}})
    assert client.published(uri)["diagnostics"] != []  # closed: the disk's broken copy again


def test_a_change_on_disk_is_noticed(client: Client, tmp_path: Path) -> None:
    base = tmp_path / "base.hpf"
    base.write_text(BROKEN_PROFILE)
    uri = open_document(client, tmp_path / "model.hpf", MODEL)
    assert client.diagnostics(uri) != []
    assert client.diagnostics(base.as_uri()) != []
    base.write_text(PROFILE)
    client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": base.as_uri(), "type": 2}]})
    assert client.published(base.as_uri())["diagnostics"] == []
    assert client.published(uri)["diagnostics"] == []


def test_a_missing_import_that_appears_is_noticed(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.hpf", MODEL)
    assert "import-not-found" in {d["code"] for d in client.diagnostics(uri)}
    (tmp_path / "base.hpf").write_text(PROFILE)
    client.notify("workspace/didChangeWatchedFiles",
                  {"changes": [{"uri": (tmp_path / "base.hpf").as_uri(), "type": 1}]})
    assert client.diagnostics(uri) == []


def test_a_client_that_can_watch_files_is_asked_to(tmp_path: Path) -> None:
    client = Client(tmp_path)
    try:
        capabilities = {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}}
        client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": capabilities})
        client.notify("initialized", {})
        asked = client.wait(lambda m: m.get("method") == "client/registerCapability")
        [registration] = asked["params"]["registrations"]
        assert registration["method"] == "workspace/didChangeWatchedFiles"
        assert registration["registerOptions"]["watchers"] == [{"globPattern": "**/*.hpf"}]
        client.send({"id": asked["id"], "result": None})  # the client's answer is read and ignored
        missing = client.call("textDocument/hover", {"textDocument": {"uri": (tmp_path / "x.hpf").as_uri()},
                                                     "position": {"line": 0, "character": 0}})
        assert "cannot read" in missing["error"]["message"]  # still answering after the client's response
    finally:
        client.close()


def test_diagnostics_use_the_client_s_own_uri(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "my-spec.hpf"
    text = "model tiny : no_such_one {\n  hidden 64  layers 2  heads 4  vocab 100  ffn_width 128\n}\n"
    path.write_text(text)
    quoted = path.as_uri().replace("my-spec", "my%2Dspec")  # the same file, quoted as some clients do
    client.notify("textDocument/didOpen", {"textDocument": {"uri": quoted, "languageId": "hpdsl",
                                                            "version": 1, "text": text}})
    assert [d["code"] for d in client.diagnostics(quoted)] == ["unknown-profile"]
