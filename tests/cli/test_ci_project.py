"""`[tool.hpdsl]` in the project's pyproject.toml: paths, import paths, trusted prefixes, a default strategy."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ci_support import EXAMPLES, hpdsl
from hpdsl.cli.app import main

TABLE = """\
[project]
name = "demo"

[tool.hpdsl]
paths = ["specs/"]
import-paths = ["vendor"]
trusted = ["my_pkg.layers"]

[tool.hpdsl.strategy]
tp = 8
sp = true
device = "h200"
recompute = "selective"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder: specs/llama3_8b.hpf, vendor/ and a pyproject.toml with a [tool.hpdsl] table."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "vendor").mkdir()
    (tmp_path / "deep" / "er").mkdir(parents=True)
    shutil.copy(EXAMPLES / "llama3_8b.hpf", tmp_path / "specs")
    (tmp_path / "pyproject.toml").write_text(TABLE, encoding="utf-8")
    return tmp_path


def test_paths_and_the_strategy_are_the_defaults(project: Path) -> None:
    run = hpdsl("compile", cwd=project)
    assert run.returncode == 0 and "1 model from" in run.stdout, run.stderr
    data = json.loads(hpdsl("estimate", "--json", cwd=project / "deep" / "er").stdout)  # found walking up
    strategy = data["strategy"]
    assert (data["model"], strategy["tp"], strategy["sequence_parallel"], strategy["device"],
            strategy["recompute"]) == ("llama3_8b", 8, True, "h200", "selective")


def test_flags_and_arguments_override_the_table(project: Path) -> None:
    data = json.loads(hpdsl("estimate", str(EXAMPLES / "llama2_7b.hpf"), "--tp", "2", "--no-sp",
                            "--json", cwd=project).stdout)
    assert (data["model"], data["strategy"]["tp"], data["strategy"]["sequence_parallel"]) == ("llama2_7b", 2,
                                                                                             False)
    assert data["strategy"]["device"] == "h200"  # what the command line did not say still comes from the table


def test_import_paths_reach_compile(project: Path) -> None:
    (project / "vendor" / "shared.hpf").write_text((EXAMPLES / "llama2_7b.hpf").read_text(encoding="utf-8"),
                                                   encoding="utf-8")
    # vendor/ is outside the project of specs/uses.hpf (its folder): only an import path lets it in.
    (project / "specs" / "uses.hpf").write_text('import "../vendor/shared.hpf"\n', encoding="utf-8")
    run = hpdsl("compile", "specs/uses.hpf", cwd=project)
    assert run.returncode == 0, run.stderr
    (project / "pyproject.toml").write_text(TABLE.replace('import-paths = ["vendor"]\n', ""), encoding="utf-8")
    refused = hpdsl("compile", "specs/uses.hpf", cwd=project)
    assert refused.returncode == 1 and "--import-path" in refused.stderr, refused.stderr


def test_trusted_prefixes_join_hpdsl_trusted(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    monkeypatch.setenv("HPDSL_TRUSTED", "other_pkg")
    run = CliRunner().invoke(main, ["compile", "--help"], prog_name="hpdsl")
    assert run.exit_code == 0
    assert os.environ["HPDSL_TRUSTED"] == "other_pkg,my_pkg.layers"


@pytest.mark.parametrize(("change", "message"), [
    (("tp = 8", 'tp = "eight"'), "[tool.hpdsl.strategy] in {path}: tp: expected an integer, found a string 'eight'"),
    (("tp = 8", "tpp = 8"), "[tool.hpdsl.strategy] in {path}: unknown key 'tpp'; did you mean 'tp'?"),
    (('device = "h200"', 'device = "tpu"'), "[tool.hpdsl.strategy] in {path}: device: 'tpu' is not one of 'a100_80gb'"),
    (('paths = ["specs/"]', 'paths = "specs/"'), "[tool.hpdsl] in {path}: paths: expected an array of strings"),
    (('paths = ["specs/"]', 'path = ["specs/"]'), "[tool.hpdsl] in {path}: unknown key 'path'; did you mean 'paths'?"),
    (('trusted = ["my_pkg.layers"]', 'trusted = ["my pkg"]'), "trusted: 'my pkg' is not a dotted module prefix"),
    (("sp = true", "sp = 1"), "sp: expected a boolean, found an integer 1"),
    (("sp = true", "sp = "), "{path} is not valid TOML"),
])
def test_a_malformed_table_is_a_usage_error_naming_the_key(project: Path, change: tuple[str, str],
                                                           message: str) -> None:
    path = project / "pyproject.toml"
    path.write_text(TABLE.replace(*change), encoding="utf-8")
    run = hpdsl("compile", cwd=project)
    assert run.returncode == 2
    assert message.format(path=path) in run.stderr and "Traceback" not in run.stderr


def test_a_pyproject_without_the_table_is_ignored_and_the_search_goes_on_up(project: Path) -> None:
    inner = project / "deep"
    (inner / "pyproject.toml").write_text('[project]\nname = "inner"\n', encoding="utf-8")
    run = hpdsl("compile", cwd=inner)
    assert run.returncode == 0 and "1 model from" in run.stdout, run.stderr
