"""The shipped files' parses and the standard library's report cached on disk (hpdsl/syntax/cache.py,
hpdsl/cli/checked.py): a warm `hpdsl compile` reads them and imports no parser or checker; the
cached answers equal fresh ones; a damaged or read-only cache changes nothing but the time.

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

from hpdsl.diagnostics import Source
from hpdsl.resources import stdlib_files
from hpdsl.syntax import cache as parse_cache
from hpdsl.syntax.parser import parse_source as fresh_parse

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
    assert "'lark'" in cold.stderr and "'hpdsl.check'" in cold.stderr
    names = sorted(path.name.split("-")[0] for path in tmp_path.iterdir())
    assert names.count("parse") == len(stdlib_files()) and names.count("stdlib") == 1
    warm = _compile(str(tmp_path))
    assert (warm.returncode, warm.stderr.strip()) == (0, "[]")
    assert json.loads(warm.stdout) == json.loads(cold.stdout)
    assert json.loads(warm.stdout)["summary"]["files"] == len(stdlib_files())


def test_damaged_entries_are_recompiled(tmp_path: Path) -> None:
    _compile(str(tmp_path))
    for path in tmp_path.iterdir():
        if not path.name.startswith("grammar-"):
            path.write_bytes(b"not a pickle")
    again = _compile(str(tmp_path))
    assert again.returncode == 0 and json.loads(again.stdout)["ok"], again.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_a_read_only_cache_folder_still_compiles(tmp_path: Path) -> None:
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        run = _compile(str(tmp_path))
    finally:
        tmp_path.chmod(stat.S_IRWXU)
    assert run.returncode == 0 and json.loads(run.stdout)["ok"], run.stderr


def test_a_cached_parse_equals_a_fresh_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPDSL_CACHE_DIR", str(tmp_path))
    for name, path in stdlib_files():
        source = Source(name, path.read_text(encoding="utf-8"))
        stored = parse_cache.parse_source(source)    # parses and writes
        entry = parse_cache._entry(source)
        assert entry is not None and os.path.exists(entry)
        reread = parse_cache._read(entry)
        assert reread == stored == fresh_parse(source) and reread is not None
        assert reread.comments == stored.comments and reread.path == name


def test_user_files_are_never_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPDSL_CACHE_DIR", str(tmp_path))
    parse_cache.parse_text("family f { factory \"a.b:C\" }", "mine.hpf")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("parse-")]
