"""What the CI-contract tests share: the real CLI in a fresh interpreter, and the shipped examples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SCHEMAS = REPO / "docs" / "schemas"
LLAMA = str(EXAMPLES / "llama3_8b.hpf")


def hpdsl(*args: str, cwd: Path | None = None, stdin: str | None = None,
          env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """Run `hpdsl ARGS` in a fresh interpreter (stdin closed unless given)."""
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], capture_output=True, text=True,
                          check=False, cwd=cwd, input=stdin if stdin is not None else "",
                          env={**os.environ, **(env or {})}, timeout=timeout)


def json_of(*args: str, code: int = 0, **kwargs: Any) -> Any:
    """Return the JSON object `hpdsl ARGS` prints, asserting its exit code."""
    run = hpdsl(*args, **kwargs)
    assert run.returncode == code, run.stderr
    return json.loads(run.stdout)


def variant(tmp_path: Path, old: str, new: str, source: Path = EXAMPLES / "llama3_8b.hpf") -> Path:
    """Write a copy of a shipped example with one text replaced; return its path."""
    text = source.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / source.name
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path
