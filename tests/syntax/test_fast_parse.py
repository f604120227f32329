"""The fast parser (hpdsl/syntax/fast.py) builds Lark's AST, spans and comments included, or defers.

Every text goes through both (tests/property/parse_agreement.py): where Lark
fails the fast path must defer, and where the fast path answers its ast.File
must equal Lark's in every field of every node, Span fields and comments too.
Texts: every .hpf in the repository (shipped files, examples, cases, golden
inputs), grammar sentences, shipped files with characters mutated, lines spliced
or names swapped for keywords, and texts written to find the corners (keywords
as names, parentheses, limits).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property.parse_agreement import agree, swap_keywords
from property.test_fuzz import grammar_texts, mutated_files, shipped_files, spliced_files

from hpdsl import ast
from hpdsl.diagnostics import Source, Span
from hpdsl.syntax.fast_tokens import _AFTER_LITERAL, new_literal, new_name, new_span
from hpdsl.syntax.parser import _parser, keyword_text

ROOT = Path(__file__).resolve().parents[2]
ALL_FILES = sorted(ROOT.glob("**/*.hpf"))


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
        "profile p { kind k { dims { kv_heads = 2 * kv_heads  attention_sinks = 1  head_dim = (a + 1) / 2 } dims { } } }",
        "profile p { kind k { dims { a = } } }", "profile p { kind k { dims { dims = dims } } }",
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


def test_nodes_built_by_their_slots_equal_those_built_by_init() -> None:
    # The fast path sets the slots of Span, Name and Literal directly: right only while
    # their attrs __init__ does nothing more than set them.
    for node in (Span, ast.Name, ast.Literal):
        assert all(f.validator is None and f.converter is None for f in attrs.fields(node))
        assert not hasattr(node, "__attrs_post_init__") and not hasattr(node, "__attrs_pre_init__")
    span = new_span("f.hpf", 1, 2, 3, 4)
    assert (type(span), attrs.astuple(span)) == (Span, ("f.hpf", 1, 2, 3, 4))
    name, literal = new_name("a", span), new_literal(7, "int", span)
    assert (type(name), name.value, name.span) == (ast.Name, "a", span)
    assert (type(literal), literal.value, literal.kind, literal.span) == (ast.Literal, 7, "int", span)
    assert (name, literal) == (ast.Name("a", span=span), ast.Literal(7, "int", span=span))


@pytest.mark.parametrize("prefix", [
    "profile p { run { a = 1", "profile p { kind k { ops { a 2.5", "model m { a true",
    'model m { b { a "s"', "family f { selector s: int = 1", "family f { require a == false",
    "family f { variant v \"p\" when a in (1", 'profile p { hf { default a = 1',
    'profile p { hf "t" { ignore "why" { a = "b"',
])
def test_the_words_lark_reads_as_keywords_after_a_literal(prefix: str) -> None:
    # Every context of `literal` shares one LALR state, whose keywords the lexer reads there.
    lark = _parser()
    interactive = lark.parse_interactive(prefix + " ")
    interactive.exhaust_lexer()
    actions = lark.parser.parser.parser.parse_table.states[interactive.parser_state.position]
    words = {keyword_text(t) for t in lark.terminals if t.name in actions} - {None}
    assert words == _AFTER_LITERAL


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
    rng = draw(st.randoms(use_true_random=False))
    return Source(str(path), swap_keywords(path.read_text(), rng))


@_SLOW
@given(keyword_swapped())
@example(Source("k.hpf", "model m { hidden 1 accepts 2 }"))
def test_keyword_swapped_files(source: Source) -> None:
    agree(source)
