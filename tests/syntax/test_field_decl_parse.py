"""`field` declarations parse alike in the fast path and Lark, format back to themselves, and read as written.

grammar/hpdsl.lark, "Model fields": `field NAME: TYPE [BOUNDS] [in BLOCK] [= DEFAULT | required]
[hf(KEYS)] "MEANING"`, at the top level and inside profiles and families.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property.parse_agreement import agree

from hpdsl import ast
from hpdsl.diagnostics import Source
from hpdsl.errors import SpecError
from hpdsl.fmt import format_source
from hpdsl.syntax import parse_text

DECLARATIONS = [
    'field hidden: int >= 1 required hf(hidden_size, d_model, n_embd) "hidden size h"',
    'field mtp: int >= 0 <= 1048576 = 0 hf(mtp_depth,) "multi-token-prediction layers"',
    'field experts: int >= 1 in moe required "routed experts E"',
    'field norm: enum(rmsnorm, layernorm) = rmsnorm "the normalisation"',
    "field word_embed_proj_dim: int >= 1 in model \"the width of OPT's projected embedding\"",
    'field rotary_fraction: float = 0.5 "the rotary share of a head"',
    'field label: string = "x" "a string with a default"',
    'field gated: bool in moe = true "a flag"',
    'field a: int >= -2 "a negative bound parses (the check refuses nothing here)"',
]


@pytest.mark.parametrize("where", ["{}", "profile p {{ {} }}", "family f {{ {} }}",
                                   "profile p {{ kind k {{ }} {}\n default k }}"])
@pytest.mark.parametrize("decl", DECLARATIONS)
def test_the_fast_path_and_lark_agree(where: str, decl: str) -> None:
    assert agree(Source("f.hpf", where.format(decl))) is not None


def test_the_shipped_standard_declarations_take_the_fast_path() -> None:
    from hpdsl.resources import data_dir

    path = data_dir("fields") / "model.hpf"
    assert agree(Source(str(path), path.read_text())) is not None


def test_a_declaration_reads_as_written() -> None:
    [decl] = parse_text('field mtp: int >= 0 <= 64 in mla = 0 hf(a, b) "m"').items
    assert isinstance(decl, ast.FieldDecl)
    assert (decl.name.value, decl.type, [(b.op, b.value.value) for b in decl.bounds]) == (
        "mtp", ast.ScalarType("int"), [(">=", 0), ("<=", 64)])
    assert decl.block is not None and decl.block.value == "mla"
    assert decl.default == ast.Literal(0, "int") and not decl.required
    assert [k.value for k in decl.hf] == ["a", "b"] and decl.meaning.value == "m"
    [required] = parse_text('field x: bool required "m"').items
    assert isinstance(required, ast.FieldDecl) and required.required and required.default is None


@pytest.mark.parametrize("text", [
    'field x: int "m" hf(a)',  # the keys come before the meaning
    'field x: int = 1 required "m"',  # a default or required, not both
    'field x int "m"',
    'field x: int',  # the meaning is not optional
    'model m { field x: int "m" }',  # a model states fields; it does not declare them
    'field gated: bool = true in moe "m"',  # the block comes before the default
])
def test_a_malformed_declaration_is_a_syntax_error(text: str) -> None:
    with pytest.raises(SpecError) as error:
        parse_text(text)
    assert error.value.diagnostics[0].code in ("syntax-error", "unexpected-end")
    agree(Source("bad.hpf", text))


def test_formatting_keeps_declarations_together_and_wraps_a_long_meaning() -> None:
    text = ("field a: int >= 1 \"one\"\nfield b: bool \"two\"\n\nprofile p {\n  field c: int >= 1 hf(x) "
            f"\"{'long ' * 25}\"\n}}\n")
    formatted = format_source(Source("f.hpf", text))
    assert formatted.startswith('field a: int >= 1 "one"\nfield b: bool "two"\n\nprofile p {\n')
    assert '  field c: int >= 1 hf(x)\n      "long ' in formatted
    assert format_source(Source("f.hpf", formatted)) == formatted
    assert parse_text(formatted) == parse_text(text)


_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: n not in {"in", "int", "bool", "enum", "float", "string", "required", "hf", "true", "false",
                        "field", "model"})


@st.composite
def declarations(draw: st.DrawFn) -> str:
    """Draw one field declaration, each optional part present or not."""
    type_ = draw(st.sampled_from(["int", "float", "bool", "string", "enum(a, b)"]))
    parts = [f"field {draw(_NAMES)}: {type_}"]
    parts += [f"{op} {draw(st.integers(0, 10 ** 6))}" for op in draw(st.lists(st.sampled_from([">=", "<="]),
                                                                               max_size=2))]
    if draw(st.booleans()):
        parts.append(f"in {draw(st.sampled_from(['model', 'moe', 'ssm']))}")
    parts += draw(st.sampled_from([[], ["required"], ["= 3"], ["= a"], ['= "s"'], ["= true"]]))
    if draw(st.booleans()):
        parts.append(f"hf({', '.join(draw(st.lists(_NAMES, min_size=1, max_size=3)))})")
    parts.append('"meaning"')
    return " ".join(parts)


@settings(max_examples=200, deadline=None)
@given(st.lists(declarations(), min_size=1, max_size=4))
def test_drawn_declarations_agree_and_round_trip_through_fmt(decls: list[str]) -> None:
    text = "profile p {\n" + "\n".join(decls) + "\n}\n"
    source = Source("drawn.hpf", text)
    assert agree(source) is not None
    formatted = format_source(source)
    assert parse_text(formatted) == parse_text(text)
