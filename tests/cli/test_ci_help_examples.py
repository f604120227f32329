"""Every example in every command's `--help` runs and exits 0, in a fresh folder holding the shipped examples.

The examples are parsed out of the real help text (the indented lines under
"Examples:", a trailing backslash joining the next line, a description after
two spaces or a `#` left out) and run by bash, in order, in one temporary folder
per command, so one example may use what an earlier one wrote (registry.json).
`import-hf` examples read config.json: a published config (tests/importers/hf_configs.py).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ci_support import EXAMPLES, hpdsl
from hpdsl.cli.app import COMMANDS
from tests.importers.hf_configs import config_bytes

SLOW = ("hpdsl train", "--run")
"""Examples that train on several processes: run with the slow tests (unless they only print the command)."""


def slow(example: str) -> bool:
    """Return whether an example trains (the slow tests run it)."""
    return any(word in example for word in SLOW) and "--print-command" not in example


def examples(help_text: str) -> list[str]:
    """Return the example command lines of a help text, continuations joined, descriptions left out."""
    lines: list[str] = []
    inside = False
    for line in help_text.splitlines():
        if line.strip() == "Examples:":
            inside = True
            continue
        if inside and not line.startswith("    "):
            inside = False
        if not inside:
            continue
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1].rstrip() + " " + line.strip()
        else:
            lines.append(line.strip())
    return [re.split(r"\s{2,}(?=#|[^-\s\\])|\s+#", line, maxsplit=1)[0].strip() for line in lines]


def help_of(command: str) -> str:
    """Return `hpdsl COMMAND --help` (the group's own with an empty command)."""
    run = hpdsl(*([command] if command else []), "--help")
    assert run.returncode == 0, run.stderr
    return run.stdout


COMMAND_NAMES = ["", *sorted(COMMANDS), "completion"]
"""The group itself (""), every command, and click's completion."""


@functools.cache
def all_examples() -> tuple[tuple[str, str], ...]:
    """Return (command, example) for every example of every help text (read once, when a test asks)."""
    return tuple((command, example) for command in COMMAND_NAMES for example in examples(help_of(command)))


LSP_SESSION = "".join(
    f"Content-Length: {len(body)}\r\n\r\n{body}"
    for body in ('{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}',
                 '{"jsonrpc": "2.0", "method": "initialized", "params": {}}',
                 '{"jsonrpc": "2.0", "id": 2, "method": "shutdown"}', '{"jsonrpc": "2.0", "method": "exit"}'))
"""What an editor sends to open and end a language-server session: `hpdsl lsp` examples read it as their stdin."""


def test_the_parser_finds_every_commands_examples() -> None:
    ALL = all_examples()
    with_examples = {command for command, _ in ALL}
    assert with_examples == {"", *COMMANDS, "completion"}
    assert ("estimate", "hpdsl estimate examples/mixtral_8x7b.hpf --set layers=4 --set experts=4") in ALL
    joined = [e for c, e in ALL if c == "train"]
    assert joined and joined[0].endswith("--set expert_width=32")  # continuation lines joined
    assert not any(e.endswith("\\") for _, e in ALL)
    assert ("", "hpdsl compile examples/") in ALL  # the description after two spaces is left out


def _folder(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(EXAMPLES, work / "examples")
    # Llama-3.2-1B-Instruct's published config.json, byte for byte (tests/data/hf/SOURCES.md): a llama, as
    # the `--profile llama2` example needs.
    (work / "config.json").write_bytes(config_bytes("llama_3_2_1b_instruct"))
    (tmp_path / "home" / ".config" / "fish" / "completions").mkdir(parents=True)
    return work


@pytest.mark.parametrize("command", COMMAND_NAMES)
def test_every_example_exits_0(command: str, tmp_path: Path) -> None:
    work = _folder(tmp_path)
    # `hpdsl` is this interpreter's script; HOME is the temporary one (the fish example writes there).
    env = {**os.environ, "HOME": str(tmp_path / "home"),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    for example in (e for c, e in all_examples() if c == command):
        if slow(example) and not os.environ.get("HPDSL_SLOW_EXAMPLES"):
            continue  # test_the_training_examples_exit_0 runs them
        _run(example, work, env)


@pytest.mark.slow
def test_the_training_examples_exit_0(tmp_path: Path) -> None:
    work = _folder(tmp_path)
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    training = [e for _, e in all_examples() if slow(e)]
    assert len(training) == 2  # search --run and the CPU train example (the GPU one prints its command)
    for example in training:
        _run(example, work, env)


def _run(example: str, work: Path, env: dict[str, str]) -> None:
    session = LSP_SESSION if example.startswith("hpdsl lsp") else ""  # the server reads its stdin until exit
    run = subprocess.run(["bash", "-c", f"set -eo pipefail; {example}"], cwd=work, env=env, capture_output=True,
                         text=True, check=False, timeout=600, input=session)
    assert run.returncode == 0, f"{example}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
    assert "Traceback" not in run.stderr, example
