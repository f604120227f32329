"""Golden tests of `hpdsl fmt`: tests/golden/fmt/<name>.in.hpf formats to <name>.out.hpf.

Regenerate the .out files with `pytest tests/fmt/test_fmt.py --update-golden` and
review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from goldens import compare_golden

from hpdsl import ast
from hpdsl.diagnostics import Source
from hpdsl.errors import SpecError
from hpdsl.fmt import format_file, format_literal, format_source
from hpdsl.syntax import parse_text

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "fmt"


def golden_inputs() -> list[Path]:
    """Return every golden input, sorted."""
    return sorted(GOLDEN.glob("*.in.hpf"))


def _read(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as handle:  # keep CRLF and form feeds as they are
        return handle.read()


@pytest.mark.parametrize("path", golden_inputs(), ids=lambda p: p.name.removesuffix(".in.hpf"))
def test_golden(path: Path, update_golden: bool) -> None:
    expected_path = path.with_name(path.name.replace(".in.hpf", ".out.hpf"))
    text = _read(path)
    formatted = format_source(Source(path.name, text))
    compare_golden(expected_path, formatted, update_golden)
    # The output is a fixed point, says the same thing and keeps every comment, in order.
    assert format_source(Source(expected_path.name, formatted)) == formatted
    original, again = parse_text(text), parse_text(formatted)
    assert again == original
    assert [c.text for c in again.comments] == [c.text for c in original.comments]


def test_every_golden_input_has_its_output() -> None:
    outputs = {p.name.removesuffix(".out.hpf") for p in GOLDEN.glob("*.out.hpf")}
    inputs = {p.name.removesuffix(".in.hpf") for p in golden_inputs()}
    assert outputs == inputs


def test_format_source_reports_bad_syntax() -> None:
    with pytest.raises(SpecError) as info:
        format_source(Source("bad.hpf", "model m {"))
    assert info.value.diagnostics[0].code == "unexpected-end"


def test_empty_file_formats_to_nothing() -> None:
    assert format_file(ast.File("<x>", ())) == ""


@pytest.mark.parametrize(("literal", "text"), [
    (ast.Literal(1e-05, "float"), "1.0e-05"),
    (ast.Literal(1e16, "float"), "1.0e+16"),
    (ast.Literal(2.5, "float"), "2.5"),
    (ast.Literal(-0.0, "float"), "-0.0"),
    (ast.Literal(float("inf"), "float"), "1.0e999"),
    (ast.Literal(float("-inf"), "float"), "-1.0e999"),
    (ast.Literal(-3, "int"), "-3"),
    (ast.Literal(True, "bool"), "true"),
    (ast.Literal('a"b\\c\nd', "string"), '"a\\"b\\\\c\\nd"'),
])
def test_literals_parse_back(literal: ast.Literal, text: str) -> None:
    assert format_literal(literal) == text
    field = parse_text(f"model m {{ x {text} }}").items[0].items[0]
    assert field.value == literal


def test_long_ops_block_wraps_one_entry_per_line() -> None:
    counts = "  ".join(f"op{i} {i}" for i in range(20))
    out = format_source(Source("x", f"profile p {{ kind k {{ ops {{ {counts} }} }} }}"))
    assert "      op19 19\n    }\n" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_shipped_files_are_in_canonical_form() -> None:
    """Every shipped .hpf is what `hpdsl fmt` prints: `hpdsl fmt --check` passes on them."""
    from hpdsl.diagnostics import Source
    from hpdsl.fmt import format_source

    root = Path(__file__).resolve().parents[2]
    for folder in ("profiles", "families", "examples"):
        for path in sorted((root / folder).rglob("*.hpf")):
            text = path.read_text()
            assert format_source(Source(str(path), text)) == text, f"{path} is not canonical"


def test_a_kinds_dims_print_on_one_line_while_they_fit() -> None:
    """A kind's `dims { }` (docs/language.md#kind-dims): one line, entries two spaces apart, else one a line."""
    from hpdsl.diagnostics import Source
    from hpdsl.fmt import format_source
    short = "profile p { kind k { dims {kv_heads=2*kv_heads attention_sinks=1} } }\n"
    assert "    dims { kv_heads = 2 * kv_heads  attention_sinks = 1 }\n" in format_source(Source("p.hpf", short))
    long = "profile p { kind k { dims { " + "  ".join(f"heads = heads + {'x' * 40}{n}" for n in range(3)) + " } } }\n"
    assert "    dims {\n      heads = heads + " in format_source(Source("p.hpf", long))


def test_a_saved_term_formats_with_the_flops_terms_and_parses_back() -> None:
    text = ('family f {\n  factory "p.m:F"\n  cost {\n    flops scan = hidden\n'
            '    saved   scan=5*ssm_expand*hidden+2*ssm_state  replicate if ssm_proj_bias\n  }\n}\n')
    formatted = format_source(Source("f.hpf", text))
    assert "    saved scan = 5 * ssm_expand * hidden + 2 * ssm_state replicate if ssm_proj_bias\n" in formatted
    assert "    flops scan = hidden\n" in formatted  # the `=` signs lined up
    assert format_source(Source("f.hpf", formatted)) == formatted
    assert parse_text(formatted) == parse_text(text)
