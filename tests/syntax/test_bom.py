"""A UTF-8 byte-order mark at the top of a file (some Windows editors write one) is skipped by both
parsers (hpdsl/syntax/text.py `without_bom`), moves no position, and is kept by `hpdsl fmt --write`.

Anywhere else the character is what it always was: one that starts no token.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from property.ast_strategies import files
from property.parse_agreement import agree, differences, lark
from property.test_fuzz import shipped_files

from hpdsl import ast
from hpdsl.diagnostics import Source
from hpdsl.fmt import format_file
from hpdsl.syntax.text import BOM

ROOT = Path(__file__).resolve().parents[2]
BAD = "profile p {\n  run { a 1 }\n}\n"
UGLY = 'family   f {factory "a.b:C"}\n'


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HPDSL_CACHE_DIR": ""}
    return subprocess.run([sys.executable, "-m", "hpdsl", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def _twins(tmp_path: Path, text: str) -> tuple[Path, Path]:
    """Write `text` as spec.hpf in two folders, with and without a byte-order mark."""
    plain, marked = tmp_path / "plain", tmp_path / "marked"
    for folder, prefix in ((plain, ""), (marked, BOM)):
        folder.mkdir()
        (folder / "spec.hpf").write_text(prefix + text, encoding="utf-8")
    return plain, marked


def test_a_marked_file_compiles_as_the_plain_one(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "llama3_8b.hpf").read_text(encoding="utf-8")
    plain, marked = _twins(tmp_path, text)
    runs = [_hpdsl("compile", "--json", "spec.hpf", cwd=folder) for folder in (plain, marked)]
    assert [run.returncode for run in runs] == [0, 0], runs[1].stderr
    assert json.loads(runs[0].stdout) == json.loads(runs[1].stdout)


def test_a_syntax_error_after_the_mark_is_where_it_is_without_it(tmp_path: Path) -> None:
    plain, marked = _twins(tmp_path, BAD)
    for flags in (["--json"], []):  # the JSON, and the text with the source line and its caret
        runs = [_hpdsl("compile", *flags, "spec.hpf", cwd=folder) for folder in (plain, marked)]
        assert [run.returncode for run in runs] == [1, 1]
        assert (runs[0].stdout, runs[0].stderr) == (runs[1].stdout, runs[1].stderr)
    (diagnostic,) = json.loads(_hpdsl("compile", "--json", "spec.hpf", cwd=marked).stdout)["diagnostics"]
    assert (diagnostic["line"], diagnostic["col"], diagnostic["code"]) == (2, 11, "syntax-error")


def test_an_error_on_the_first_line_keeps_its_column(tmp_path: Path) -> None:
    plain, marked = _twins(tmp_path, "profile p { run { a 1 } }\n")
    found = [json.loads(_hpdsl("compile", "--json", "spec.hpf", cwd=folder).stdout)["diagnostics"]
             for folder in (plain, marked)]
    assert found[0] == found[1] and (found[0][0]["line"], found[0][0]["col"]) == (1, 21)


def test_a_mark_anywhere_else_is_an_unexpected_character(tmp_path: Path) -> None:
    for index, text in enumerate((BOM + BOM + UGLY, UGLY.replace("{", "{" + BOM), "\n" + BOM + UGLY)):
        folder = tmp_path / str(index)
        folder.mkdir()
        (folder / "spec.hpf").write_text(text, encoding="utf-8")
        run = _hpdsl("compile", "--json", "spec.hpf", cwd=folder)
        (diagnostic,) = json.loads(run.stdout)["diagnostics"]
        assert (run.returncode, diagnostic["code"]) == (1, "unexpected-character"), text
        assert "'\\ufeff'" in diagnostic["message"]
    first = json.loads(_hpdsl("compile", "--json", "spec.hpf", cwd=tmp_path / "0").stdout)["diagnostics"][0]
    assert (first["line"], first["col"]) == (1, 1)  # the second mark, where the first is skipped


def test_fmt_write_keeps_the_mark(tmp_path: Path) -> None:
    plain, marked = _twins(tmp_path, UGLY)
    for folder in (plain, marked):
        run = _hpdsl("fmt", "--write", "spec.hpf", cwd=folder)
        assert run.returncode == 0 and run.stdout == "reformatted spec.hpf\n", run.stderr
    canonical = (plain / "spec.hpf").read_text(encoding="utf-8")
    assert canonical == 'family f {\n  factory "a.b:C"\n}\n'
    assert (marked / "spec.hpf").read_bytes() == b"\xef\xbb\xbf" + canonical.encode()
    check = _hpdsl("fmt", "--check", "spec.hpf", cwd=marked)
    assert (check.returncode, check.stdout) == (0, ""), check.stderr
    shown = _hpdsl("fmt", "spec.hpf", cwd=marked)
    assert shown.stdout == BOM + canonical


def test_both_parsers_skip_the_mark_on_every_shipped_file() -> None:
    for path in shipped_files():
        text = path.read_text(encoding="utf-8")
        marked, plain = Source(str(path), BOM + text), Source(str(path), text)
        quick = agree(marked)  # the fast path's tree is Lark's, spans and comments included
        assert quick is not None and differences(quick, lark(plain)) == [], path


@given(files)
def test_the_mark_moves_no_span(file: ast.File) -> None:
    text = format_file(file)
    plain, marked = Source("<bom>", text), Source("<bom>", BOM + text)
    reference = lark(plain)
    agree(marked)  # the fast path defers or builds Lark's tree of the marked text
    assert reference is not None and differences(lark(marked), reference) == []
