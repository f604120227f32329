"""`hpdsl compile --format sarif`: a SARIF 2.1.0 log that validates and carries every diagnostic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from hpdsl.diagnostics.codes import CODES

REPO = Path(__file__).resolve().parents[2]
# The OASIS SARIF 2.1.0 schema (sarif-2.1.0-rtm.5.json, the final 2.1.0 release as schemastore
# publishes it), shipped in the MIT-licensed npm package @microsoft/jest-sarif 1.0.0-beta.0.
SCHEMA = json.loads((REPO / "tests/data/sarif-schema-2.1.0.json").read_text())

# An unknown profile (with a hint), a duplicate model (with a note on the first), a missing field.
BROKEN = """\
model broken : no_such_profile {
  hidden 8  layers 2  heads 2  vocab 10
}
model broken : llama2 {
  hidden 8
}
"""


def hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `hpdsl ARGS` in a fresh interpreter, in `cwd`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "hpdsl", *args], cwd=cwd, capture_output=True,
                          text=True, check=False, env=env)


def sarif_and_json(tmp_path: Path, text: str) -> tuple[dict, dict, int]:
    (tmp_path / "broken.hpf").write_text(text)
    sarif = hpdsl("compile", "--format", "sarif", "broken.hpf", cwd=tmp_path)
    plain = hpdsl("compile", "--json", "broken.hpf", cwd=tmp_path)
    return json.loads(sarif.stdout), json.loads(plain.stdout), sarif.returncode


def test_sarif_validates_and_carries_every_diagnostic(tmp_path: Path) -> None:
    log, plain, code = sarif_and_json(tmp_path, BROKEN)
    assert code == 1
    jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(log)
    results = log["runs"][0]["results"]
    expected = [(d["code"], d["line"], d["col"], d["end_line"], d["end_col"])
                for d in plain["diagnostics"]]
    got = [(r["ruleId"], *(r["locations"][0]["physicalLocation"]["region"][k]
                           for k in ("startLine", "startColumn", "endLine", "endColumn")))
           for r in results]
    assert got == expected and len(got) == 3
    for result in results:
        assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {
            "uri": "broken.hpf", "uriBaseId": "SRCROOT"}


def test_rules_are_the_code_table(tmp_path: Path) -> None:
    log, _, _ = sarif_and_json(tmp_path, BROKEN)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(CODES)
    assert all(r["shortDescription"]["text"] == CODES[r["id"]] for r in rules)
    for result in log["runs"][0]["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_notes_are_related_locations_and_hints_kept(tmp_path: Path) -> None:
    log, plain, _ = sarif_and_json(tmp_path, BROKEN)
    by_code = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    related = by_code["duplicate-model"]["relatedLocations"]
    assert related[0]["physicalLocation"]["region"]["startLine"] == 1
    assert related[0]["message"]["text"]
    hint = next(d["hint"] for d in plain["diagnostics"] if d["code"] == "unknown-profile")
    assert by_code["unknown-profile"]["properties"]["hint"] == hint
    assert hint in by_code["unknown-profile"]["message"]["text"]


def test_syntax_error_and_clean_file(tmp_path: Path) -> None:
    log, _, code = sarif_and_json(tmp_path, "model broken : llama2 {\n  hidden = 8\n}\n")
    jsonschema.validate(log, SCHEMA)
    assert code == 1 and log["runs"][0]["results"][0]["level"] == "error"
    clean, _, code = sarif_and_json(tmp_path, "// nothing\n")
    jsonschema.validate(clean, SCHEMA)
    assert code == 0 and clean["runs"][0]["results"] == []
