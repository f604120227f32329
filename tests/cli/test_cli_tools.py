"""`hpdsl --version`, `python -m hpdsl`, shell completion, and an example in every command's help."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import hpdsl
from hpdsl.cli.app import COMMANDS

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m hpdsl ARGS` in a fresh interpreter."""
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "hpdsl", *args], capture_output=True, text=True,
                          check=False, env=full, cwd=REPO)


def test_version_and_python_m() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"hpdsl, version {hpdsl.__version__}"


def test_completion_script_and_answers() -> None:
    script = run("completion", "bash")
    assert script.returncode == 0 and "_HPDSL_COMPLETE=bash_complete" in script.stdout
    answers = run(env={"_HPDSL_COMPLETE": "bash_complete", "COMP_WORDS": "hpdsl d",
                       "COMP_CWORD": "1"})
    assert answers.stdout.split() == ["plain,diff"]
    options = run(env={"_HPDSL_COMPLETE": "bash_complete", "COMP_WORDS": "hpdsl compile --fo",
                       "COMP_CWORD": "2"})
    assert "plain,--format" in options.stdout.split()


@pytest.mark.parametrize("command", [*COMMANDS, "completion"])
def test_every_command_help_has_an_example(command: str) -> None:
    result = run(command, "--help")
    assert result.returncode == 0
    examples = result.stdout.split("Examples:", 1)[1]
    assert f"hpdsl {command}" in examples
