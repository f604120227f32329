"""The standard library's report cached on disk (hpdsl/cli/checked.py, hpdsl/diskcache.py): a warm
`hpdsl compile` reads it and imports no parser or checker; a cold one parses every shipped file on the
fast path, without Lark; the cached answer equals a fresh one; a damaged or read-only cache changes
nothing but the time. Hostile entries: tests/syntax/test_cache_hostile.py.

Each case runs in a fresh interpreter so nothing in-process hides the disk.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hpdsl.errors import SpecError
from hpdsl.resources import stdlib_files
from hpdsl.syntax import parse_text

ROOT = Path(__file__).resolve().parents[2]
COMPILE = ("import sys; from hpdsl.cli import main\n"
           "try:\n    main(['compile', '--json'])\n"
           "except SystemExit as end:\n"
           "    print(sorted(m for m in ('lark', 'hpdsl.check', 'hpdsl.ir.nodes') if m in sys.modules),"
           " file=sys.stderr); raise")


def _compile(folder: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HPDSL_CACHE_DIR": folder, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=300)


def test_a_warm_compile_reads_the_cache_and_loads_no_parser_or_checker(tmp_path: Path) -> None:
    cold = _compile(str(tmp_path))
    assert cold.returncode == 0, cold.stderr
    assert "'lark'" not in cold.stderr and "'hpdsl.check'" in cold.stderr
    (entry,) = tmp_path.iterdir()
    assert entry.name.startswith("stdlib-") and entry.name.endswith(".json")
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    warm = _compile(str(tmp_path))
    assert (warm.returncode, warm.stderr.strip()) == (0, "[]")
    assert json.loads(warm.stdout) == json.loads(cold.stdout)
    assert json.loads(warm.stdout)["summary"]["files"] == len(stdlib_files())


def test_damaged_entries_are_recompiled(tmp_path: Path) -> None:
    _compile(str(tmp_path))
    for path in tmp_path.iterdir():
        path.write_bytes(b"not an entry")
    again = _compile(str(tmp_path))
    assert again.returncode == 0 and json.loads(again.stdout)["ok"], again.stderr
    assert [path.read_bytes() != b"not an entry" for path in tmp_path.iterdir()] == [True]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_a_read_only_cache_folder_still_compiles(tmp_path: Path) -> None:
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        run = _compile(str(tmp_path))
    finally:
        tmp_path.chmod(stat.S_IRWXU)
    assert run.returncode == 0 and json.loads(run.stdout)["ok"], run.stderr


def test_parsing_writes_nothing_to_the_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPDSL_CACHE_DIR", str(tmp_path))
    for name, path in stdlib_files():
        parse_text(path.read_text(encoding="utf-8"), name)
    parse_text("family f { factory \"a.b:C\" }", "mine.hpf")
    with pytest.raises(SpecError):  # Lark's path, with its tables, writes nothing either
        parse_text("profile p { run { a 1 } }", "bad.hpf")
    assert list(tmp_path.iterdir()) == []
