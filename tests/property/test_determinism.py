"""registry.json is deterministic: the same inputs give the same bytes, whatever the hash seed or order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent


def compile_in_subprocess(out: Path, paths: list[str], seed: str) -> bytes:
    """Run `hpdsl compile PATHS -o OUT` in a fresh interpreter with PYTHONHASHSEED=seed."""
    run = subprocess.run([sys.executable, "-m", "hpdsl.cli", "compile", *paths, "-o", str(out)],
                         cwd=REPO, capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONHASHSEED": seed})
    assert run.returncode == 0, run.stderr
    return out.read_bytes()


@pytest.mark.slow
def test_hash_seed_does_not_change_the_bytes(tmp_path: Path) -> None:
    first = compile_in_subprocess(tmp_path / "a.json", ["examples"], "1")
    second = compile_in_subprocess(tmp_path / "b.json", ["examples"], "4242")
    assert first == second


@pytest.mark.slow
def test_the_order_of_the_files_does_not_change_the_bytes(tmp_path: Path) -> None:
    files = sorted(f"examples/{path.name}" for path in (REPO / "examples").glob("*.hpf"))
    forward = compile_in_subprocess(tmp_path / "a.json", files, "0")
    backward = compile_in_subprocess(tmp_path / "b.json", files[::-1], "7")
    assert forward == backward
