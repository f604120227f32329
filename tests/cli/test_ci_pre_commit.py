""".pre-commit-hooks.yaml: it parses, and each hook's entry is a real hpdsl command run as pre-commit runs it."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ci_support import EXAMPLES, REPO
from hpdsl.cli.app import COMMANDS

HOOKS = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
BY_ID = {hook["id"]: hook for hook in HOOKS}

# The keys pre-commit requires of every hook in a .pre-commit-hooks.yaml.
REQUIRED = ("id", "name", "entry", "language")


def test_the_hooks_are_hpdsl_fmt_and_hpdsl_compile() -> None:
    assert list(BY_ID) == ["hpdsl-fmt", "hpdsl-compile"]
    for hook in HOOKS:
        assert all(isinstance(hook.get(key), str) and hook[key] for key in REQUIRED), hook
        assert hook["language"] == "python"  # pre-commit pip-installs this repository, which gives `hpdsl`
        assert re.search(hook["files"], "specs/model.hpf") and not re.search(hook["files"], "model.py")


def test_each_entry_names_a_real_command_and_real_flags() -> None:
    for hook in HOOKS:
        program, command, *flags = shlex.split(hook["entry"])
        assert program == "hpdsl" and command in COMMANDS
        help_text = subprocess.run([sys.executable, "-m", "hpdsl.cli", command, "--help"], capture_output=True,
                                   text=True, check=True).stdout
        assert all(flag in help_text for flag in flags), (hook["id"], flags)


def _run_hook(hook_id: str, files: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a hook's entry the way pre-commit does: the entry, then the matching file names."""
    program, *arguments = shlex.split(BY_ID[hook_id]["entry"])
    assert program == "hpdsl"
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *arguments, *files], capture_output=True,
                          text=True, check=False, cwd=cwd, timeout=300)


@pytest.mark.parametrize("name", ["llama3_8b.hpf", "mixtral_8x7b.hpf"])
def test_the_hooks_pass_on_shipped_examples_and_fmt_fixes_a_file(tmp_path: Path, name: str) -> None:
    shutil.copy(EXAMPLES / name, tmp_path / name)
    assert _run_hook("hpdsl-compile", [name], tmp_path).returncode == 0
    assert _run_hook("hpdsl-fmt", [name], tmp_path).returncode == 0
    text = (tmp_path / name).read_text(encoding="utf-8")
    assert text == (EXAMPLES / name).read_text(encoding="utf-8")  # already canonical: nothing rewritten
    (tmp_path / name).write_text(text.replace("\n  ", "\n      ", 3), encoding="utf-8")
    assert _run_hook("hpdsl-fmt", [name], tmp_path).returncode == 0
    assert (tmp_path / name).read_text(encoding="utf-8") == text


def test_the_compile_hook_fails_on_a_broken_spec(tmp_path: Path) -> None:
    (tmp_path / "bad.hpf").write_text("model x : nope { hidden 8 layers 1 heads 1 vocab 8 }\n", encoding="utf-8")
    run = _run_hook("hpdsl-compile", ["bad.hpf"], tmp_path)
    assert run.returncode == 1 and "error[unknown-profile]" in run.stderr
