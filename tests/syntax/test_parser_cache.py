"""The LALR tables cached on disk (hpdsl/syntax/parser.py): written once, reused, and never required.

Each case runs in a fresh interpreter so the in-process parser cache does not hide the disk.
The cases parse with Lark alone (`lark_parse`): valid text takes the fast path
(hpdsl/syntax/fast.py), which needs no tables.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEXT = 'family f { factory "a.b:C" }'
PARSE = ("from hpdsl.diagnostics import Source; from hpdsl.syntax.parser import lark_parse; "
         f"print(len(lark_parse(Source('f.hpf', {TEXT!r})).items))")
FAST = f"from hpdsl.syntax import parse_text; print(len(parse_text({TEXT!r}).items))"


def _parse_with_cache(folder: str, code: str = PARSE) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HPDSL_CACHE_DIR": folder, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_the_fast_path_builds_no_tables(tmp_path: Path) -> None:
    run = _parse_with_cache(str(tmp_path), FAST)
    assert (run.returncode, run.stdout.strip(), run.stderr) == (0, "1", "")
    assert list(tmp_path.iterdir()) == []


def test_the_first_run_writes_the_cache_and_the_second_reads_it(tmp_path: Path) -> None:
    first = _parse_with_cache(str(tmp_path))
    assert (first.returncode, first.stdout.strip(), first.stderr) == (0, "1", "")
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].name.startswith("grammar-") and files[0].stat().st_size > 0
    written = files[0].stat().st_mtime_ns
    second = _parse_with_cache(str(tmp_path))
    assert (second.returncode, second.stdout.strip()) == (0, "1")
    assert [f.stat().st_mtime_ns for f in tmp_path.iterdir()] == [written]


def test_a_damaged_cache_is_rebuilt(tmp_path: Path) -> None:
    _parse_with_cache(str(tmp_path))
    (cached,) = tmp_path.iterdir()
    cached.write_bytes(b"not a cache\n")
    again = _parse_with_cache(str(tmp_path))
    assert (again.returncode, again.stdout.strip(), again.stderr) == (0, "1", "")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_a_read_only_cache_folder_still_parses(tmp_path: Path) -> None:
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        run = _parse_with_cache(str(tmp_path))
    finally:
        tmp_path.chmod(stat.S_IRWXU)
    assert (run.returncode, run.stdout.strip(), run.stderr) == (0, "1", "")


def test_an_unusable_cache_path_still_parses(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for folder in (str(blocker / "below"), ""):
        run = _parse_with_cache(folder)
        assert (run.returncode, run.stdout.strip(), run.stderr) == (0, "1", "")
