"""The fast parser (hpdsl/syntax/fast.py) builds Lark's AST, spans and comments included, or defers.

Every text goes through both: where Lark fails the fast path must defer, and
where the fast path answers its ast.File must equal Lark's in every field of
every node, Span fields and comments too (spans are left out of AST equality,
so `same_tree` walks both trees). Texts: every .hpf in the repository (shipped
files, examples, cases, golden inputs), grammar sentences, shipped files with
characters mutated, lines spliced or names swapped for keywords, and texts
written to find the corners (keywords as names, parentheses, limits).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property.test_fuzz import grammar_texts, mutated_files, shipped_files, spliced_files

from hpdsl import ast
from hpdsl.diagnostics import Source
from hpdsl.errors import SpecError
from hpdsl.syntax.fast import fast_parse
from hpdsl.syntax.parser import MAX_FILE_CHARS, MAX_LINE_CHARS, lark_parse

ROOT = Path(__file__).resolve().parents[2]
ALL_FILES = sorted(ROOT.glob("**/*.hpf"))
KEYWORDS = sorted(set(re.findall(r'"([a-z_]+)"', (ROOT / "grammar" / "hpdsl.lark").read_text())))
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def fast(source: Source) -> ast.File | None:
    return fast_parse(source.name, source.text, MAX_FILE_CHARS, MAX_LINE_CHARS)


def lark(source: Source) -> ast.File | None:
    try:
        return lark_parse(source)
    except SpecError:
        return None


def differences(a: Any, b: Any, path: str = "file") -> list[str]:
    """Return where two values differ, comparing attrs classes field by field, spans included."""
    if type(a) is not type(b):
        return [f"{path}: {a!r} is not {b!r}"]
    if attrs.has(type(a)):
        return [d for f in attrs.fields(type(a))
                for d in differences(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")]
    if isinstance(a, tuple):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items, not {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def agree(source: Source) -> ast.File | None:
    """Assert the fast path defers or builds Lark's tree exactly; return the fast tree."""
    quick, reference = fast(source), lark(source)
    if quick is not None:
        assert reference is not None, f"the fast path accepts what Lark rejects: {source.text!r}"
        assert differences(quick, reference) == [], source.text
    return quick


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_in_the_repository(path: Path) -> None:
    agree(Source(str(path), path.read_text()))


def test_the_shipped_files_take_the_fast_path() -> None:
    slow = [p for p in shipped_files() if agree(Source(str(p), p.read_text())) is None]
    assert slow == []


def test_corners() -> None:
    texts = [
        "", "  \n// only a comment\n", "# a\r\nmodel m {}\r\n", "\tmodel\tm\t{\t}",
        "family f { require (a and (b)) or not (c) -> ((d)) \"m\" }",
        "family f { variant v \"p\" default when (a) accepts(x,) params(a.b, c,) }",
        "family f { layout { a.b ((x + 1) * 2 / (y), (z),) colwise(1) by (heads) for v, w } }",
        "family f { selector s: int(1..4) = -3  selector t: enum(a, b,) = b  selector u: bool }",
        "family f { require x in (1, 2.5, \"s\", true, y,) and z != false }",
        "model m : p { hidden 1 flag norm rms moe { a 1 b } stack [[a * 2, b], c] * 3 layer_types [a, b,] }",
        "profile p { facts \"a\" \"b\" { norm = \"x\" mlp = 1 activation = 2.5e-3 } model_types \"a\" "
        "kind k from b { ops { a 1 } attention linear ffn moe slots { mlp mlp } } default k }",
        'vocabulary { a "x\\"y\\\\z\\n" } import "a.hpf" slots { attention attention }',
        # keywords where Lark reads them as names, and where it reads them as keywords
        "kind kind {}", "profile profile { kind from from from { } }", "model model { true 1 }",
        "profile p { run { a = 1 norm = 2 stack = 3 } }", "model m { hidden 1 parallel 2 }",
        "profile p { kind k { ops { a 1 mlp 2 } } }", "model m { moe { a 1 norm 2 } }",
        "profile p { kindx { } }", "profile p { run { a = truex = 1 } }",
        "family f { require in == in and not == or }", "family f { layout { by (a) b for (c) d } }",
        # the limits: a long integer, deep nesting
        "model m { hidden 1234567890123456789 }", "model m { hidden 999999999999999999 }",
        "family f { require " + "(" * 30 + "a" + ")" * 30 + " }",
        "family f { require " + "not " * 30 + "a }",
    ]
    for text in texts:
        agree(Source("corner.hpf", text))
    assert agree(Source("c.hpf", "model m { hidden 999999999999999999 }")) is not None


_SLOW = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.filter_too_much], deadline=None)


@_SLOW
@given(grammar_texts(spaced=True))
def test_grammar_sentences(text: str) -> None:
    agree(Source("generated.hpf", text))


@_SLOW
@given(grammar_texts(spaced=False))
def test_raw_grammar_sentences(text: str) -> None:
    agree(Source("generated.hpf", text))


@_SLOW
@given(mutated_files())
def test_mutated_files(source: Source) -> None:
    agree(source)


@_SLOW
@given(spliced_files())
def test_spliced_files(source: Source) -> None:
    agree(source)


@st.composite
def keyword_swapped(draw: st.DrawFn) -> Source:
    """Draw a repository file with one to three of its words replaced by keywords."""
    path = draw(st.sampled_from(ALL_FILES))
    text = path.read_text()
    for _ in range(draw(st.integers(1, 3))):
        words = list(_WORD.finditer(text))
        if not words:
            break
        word = draw(st.sampled_from(words))
        keyword = draw(st.sampled_from(KEYWORDS))
        text = text[:word.start()] + keyword + text[word.end():]
    return Source(str(path), text)


@_SLOW
@given(keyword_swapped())
@example(Source("k.hpf", "model m { hidden 1 accepts 2 }"))
def test_keyword_swapped_files(source: Source) -> None:
    agree(source)
