"""The LALR tables shipped beside the grammar (hpdsl/syntax/tables.py): made for this grammar, read
instead of building the parser, equal in every parse to a fresh build, and never written per user.

The cases that parse in a fresh interpreter (so the in-process parser does not hide the disk) parse
with Lark alone (`lark_parse`): valid text takes the fast path (hpdsl/syntax/fast.py), which needs no
tables.
"""

from __future__ import annotations

import json
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import lark
import pytest
from lark import Lark, UnexpectedInput

from hpdsl.syntax import parser as parser_module
from hpdsl.syntax.tables import TABLES_NAME, grammar_text, load_parser, tables_key, tables_path

ROOT = Path(__file__).resolve().parents[2]
TEXT = 'family f { factory "a.b:C" }'
PARSE = ("import sys; from hpdsl.diagnostics import Source; from hpdsl.syntax.parser import lark_parse, _parser; "
         f"print(len(lark_parse(Source('f.hpf', {TEXT!r})).items), _parser().source_path)")
FAST = (f"import sys; from hpdsl.syntax import parse_text; print(len(parse_text({TEXT!r}).items), "
        "'lark' in sys.modules)")
SHIPPED = [*sorted((ROOT / "profiles").glob("*.hpf")), *sorted((ROOT / "families").glob("*.hpf")),
           *sorted((ROOT / "examples").glob("*.hpf"))]
BROKEN = [example for _hint, _any, examples in parser_module._MISTAKES for example in examples] + [
    "profile p {", "model m { stack [a, [b] }", 'family f { factory "x', "vocabulary { a \"b\" } }", "@"]


def _parse_with_cache(folder: str, code: str = PARSE) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HPDSL_CACHE_DIR": folder, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def _key() -> str:
    return tables_key(grammar_text(), parser_module.parser_options(), parser_module.KEYWORD_SALT)


def test_the_shipped_tables_are_made_for_this_grammar() -> None:
    shipped = json.loads(tables_path().read_text(encoding="utf-8"))
    assert (shipped["format"], shipped["key"]) == (1, _key()), \
        "grammar/hpdsl.tables.json is stale: run `python -m hpdsl.syntax.rebuild_tables`"


@pytest.mark.skipif(json.loads(tables_path().read_text(encoding="utf-8"))["lark"] != lark.__version__,
                    reason="the shipped tables were built with another Lark: this one builds its own")
def test_the_parser_comes_from_the_shipped_tables_and_parses_as_a_fresh_build() -> None:
    shipped = parser_module._parser()
    assert shipped.source_path == "<deserialized>"
    fresh = Lark(grammar_text(), **parser_module.parser_options())
    for path in SHIPPED:
        text = path.read_text(encoding="utf-8")
        assert shipped.parse(text) == fresh.parse(text), path
    for text in BROKEN:
        assert _failure(shipped, text) == _failure(fresh, text), text


def _failure(parser: Lark, text: str) -> tuple[Any, ...]:
    with pytest.raises(UnexpectedInput) as caught:
        parser.parse(text)
    error = caught.value
    accepts = getattr(error, "interactive_parser", None)
    return (type(error), error.line, error.column, sorted(accepts.accepts()) if accepts else None)


def _damaged(folder: Path) -> dict[str, bytes]:
    good = tables_path().read_bytes()
    planted = folder / "planted"
    return {
        "random bytes": os.urandom(4096),
        "truncated": good[: len(good) // 2],
        "another key": good.replace(_key().encode(), b"0" * 64),
        "another Lark": good.replace(f'"lark":"{lark.__version__}"'.encode(), b'"lark":"0.0"'),
        "wrong shapes": json.dumps({"format": 1, "key": _key(), "lark": lark.__version__,
                                    "data": {"parser": []}, "memo": {"__int_keys__": [[0, 1]]}}).encode(),
        "int keys of the wrong shape": good.replace(b'"__int_keys__":[[', b'"__int_keys__":[["x",', 1),
        "a pickle": pickle.dumps(_Plant(str(planted))),
    }


class _Plant:
    """A pickle that creates a file when it is unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def test_damaged_or_stale_tables_build_the_parser_in_memory(tmp_path: Path) -> None:
    for case, data in _damaged(tmp_path).items():
        path = tmp_path / TABLES_NAME
        path.write_bytes(data)
        parser = load_parser(grammar_text(), parser_module.parser_options(), parser_module.KEYWORD_SALT, path)
        assert parser.source_path != "<deserialized>", case
        assert parser.parse(TEXT) == parser_module._parser().parse(TEXT), case
    assert not (tmp_path / "planted").exists()


def test_tables_that_are_a_fifo_do_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / TABLES_NAME
    os.mkfifo(fifo)
    code = ("from hpdsl.syntax import parser as p; from hpdsl.syntax.tables import load_parser, grammar_text; "
            f"print(load_parser(grammar_text(), p.parser_options(), p.KEYWORD_SALT, {str(fifo)!r}).parse({TEXT!r}))")
    run = _parse_with_cache("", code)
    assert run.returncode == 0 and run.stdout.startswith("Tree("), run.stderr


def test_the_fast_path_loads_no_lark(tmp_path: Path) -> None:
    run = _parse_with_cache(str(tmp_path), FAST)
    assert (run.returncode, run.stdout.strip(), run.stderr) == (0, "1 False", "")
    assert list(tmp_path.iterdir()) == []


def test_lark_reads_the_shipped_tables_and_writes_nothing(tmp_path: Path) -> None:
    same_lark = json.loads(tables_path().read_text(encoding="utf-8"))["lark"] == lark.__version__
    for _ in range(2):
        run = _parse_with_cache(str(tmp_path))
        assert (run.returncode, run.stdout.split()[0], run.stderr) == (0, "1", "")
        assert (run.stdout.split()[1] == "<deserialized>") == same_lark
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_a_read_only_cache_folder_still_parses(tmp_path: Path) -> None:
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        run = _parse_with_cache(str(tmp_path))
    finally:
        tmp_path.chmod(stat.S_IRWXU)
    assert (run.returncode, run.stdout.split()[0], run.stderr) == (0, "1", "")


def test_an_unusable_cache_path_still_parses(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for folder in (str(blocker / "below"), ""):
        run = _parse_with_cache(folder)
        assert (run.returncode, run.stdout.split()[0], run.stderr) == (0, "1", "")
