"""Formatter invariants: parse(fmt(ast)) == ast, fmt is idempotent, comments survive."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ast_strategies import files
from hpdsl import ast
from hpdsl.diagnostics import Source
from hpdsl.fmt import format_file, format_source
from hpdsl.syntax import parse_source, parse_text
from hpdsl.syntax.parser import _parser

ROOT = Path(__file__).resolve().parents[2]


def shipped_files() -> list[Path]:
    """Return every shipped .hpf file (looked up when the tests are collected)."""
    return sorted(p for folder in ("profiles", "families", "examples")
                  for p in (ROOT / folder).glob("*.hpf"))


def _texts(file: ast.File) -> list[str]:
    return [c.text for c in file.comments]


@given(files)
@example(ast.File("<x>", (ast.Model(ast.Name("m"), None, (
    ast.Field(ast.Name("f"), ast.Literal(1e-05, "float")),
    ast.Field(ast.Name("g"), ast.Literal(float("inf"), "float")))),)))
@example(ast.File("<x>", (ast.Family(ast.Name("f"), (ast.Require(ast.AllOf((
    ast.AllOf((ast.Reference(ast.Name("a")), ast.Reference(ast.Name("b")))),
    ast.Reference(ast.Name("c")))), None),)),)))
def test_parse_inverts_fmt(file: ast.File) -> None:
    assert parse_text(format_file(file)) == file


@given(files)
def test_fmt_is_idempotent(file: ast.File) -> None:
    text = format_file(file)
    assert format_source(Source("<fmt>", text)) == text


@pytest.mark.parametrize("path", shipped_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_file_round_trips(path: Path) -> None:
    source = Source(str(path), path.read_text())
    parsed = parse_source(source)
    once = format_file(parsed)
    reparsed = parse_text(once)
    assert reparsed == parsed
    assert _texts(reparsed) == _texts(parsed) and len(parsed.comments) == len(reparsed.comments)
    assert format_source(Source("<fmt>", once)) == once


@st.composite
def commented_texts(draw: st.DrawFn) -> tuple[ast.File, str, list[str]]:
    """Draw a file, format it, and inject blank lines, own-line and trailing comments."""
    file = draw(files)
    lines = format_file(file).split("\n")
    out: list[str] = []
    texts: list[str] = []
    for line in lines:
        if draw(st.integers(0, 5)) == 0:
            out.append("")
        if draw(st.integers(0, 3)) == 0:
            texts.append(f"// above {len(texts)}")
            out.append(texts[-1])
        if line.strip() and draw(st.integers(0, 3)) == 0:
            texts.append(f"# after {len(texts)}")
            line += "  " + texts[-1]
        out.append(line)
    return file, "\n".join(out), texts


@given(commented_texts())
def test_comments_survive(case: tuple[ast.File, str, list[str]]) -> None:
    file, text, texts = case
    parsed = parse_text(text)
    assert _texts(parsed) == texts
    assert attrs.evolve(parsed, comments=()) == file
    formatted = format_file(parsed)
    assert _texts(parse_text(formatted)) == texts
    assert format_source(Source("<fmt>", formatted)) == formatted


_BREAKS = ("\n", "\n\n", "  // t{}\n", "\n// o{}\n", "\n\n# o{}\n\n", "\t")


@st.composite
def scrambled_texts(draw: st.DrawFn) -> tuple[ast.File, str, list[str]]:
    """Draw a file (generated or shipped) and re-space it: line breaks, blank lines and
    comments between any two tokens, inside conditions, lists and headers too."""
    if draw(st.booleans()):
        file = draw(files)
        text = format_file(file)
    else:
        path = draw(st.sampled_from(shipped_files()))
        text = path.read_text()
        file = parse_text(text)
    tokens = list(_parser().lex(text))
    out: list[str] = []
    expected: list[str] = []
    at = 0
    for token in tokens:  # the lexer skips comments: the file's own stay where they are
        out.append(text[at:token.end_pos])
        at = token.end_pos
        if draw(st.integers(0, 4)) == 0:
            brk = draw(st.sampled_from(_BREAKS)).format(len(expected))
            if "//" in brk or "#" in brk:
                expected.append(brk.strip())
            out.append(brk)
    out.append(text[at:])
    return file, "".join(out), expected


@given(scrambled_texts())
def test_scrambled_layout_formats_back(case: tuple[ast.File, str, list[str]]) -> None:
    file, text, injected = case
    parsed = parse_text(text)
    assert attrs.evolve(parsed, comments=()) == attrs.evolve(file, comments=())
    assert [t for t in _texts(parsed) if t not in _texts(file)] == injected
    formatted = format_file(parsed)
    assert _texts(parse_text(formatted)) == _texts(parsed)
    assert format_source(Source("<fmt>", formatted)) == formatted
