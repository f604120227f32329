"""`compile --format sarif` that cannot finish (a missing file, a refused output) still prints a valid SARIF log."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from ci_support import REPO, hpdsl

SCHEMA = json.loads((REPO / "tests/data/sarif-schema-2.1.0.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("args", "says"), [
    (("missing.hpf",), "'missing.hpf': no such file or folder"),
    (("empty/",), "no .hpf files in the folder"),
    (("good.hpf", "-o", "good.hpf"), "good.hpf"),
])
def test_an_io_error_is_a_valid_log_with_the_error_as_a_notification(tmp_path: Path, args: tuple[str, ...],
                                                                     says: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "good.hpf").write_text("// nothing\n", encoding="utf-8")
    run = hpdsl("compile", "--format", "sarif", *args, cwd=tmp_path)
    assert run.returncode == 2
    log = json.loads(run.stdout)
    jsonschema.validate(log, SCHEMA)
    invocation = log["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    notification = invocation["toolExecutionNotifications"][0]
    assert notification["level"] == "error" and says in notification["message"]["text"]
    assert log["runs"][0]["results"] == []
    assert says in run.stderr  # the text report on stderr is unchanged


def test_a_run_that_completes_says_so(tmp_path: Path) -> None:
    (tmp_path / "good.hpf").write_text("// nothing\n", encoding="utf-8")
    run = hpdsl("compile", "--format", "sarif", "good.hpf", cwd=tmp_path)
    assert run.returncode == 0
    log = json.loads(run.stdout)
    jsonschema.validate(log, SCHEMA)
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True}]
