"""Unit tests of check_models: what each diagnostic says, where it points, what passes.

The error-case files under tests/cases/models/ pin which code each mistake gets;
these tests pin the messages, hints and spans, and that the examples are clean.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hpdsl.check import check_files
from hpdsl.check.model_rules import small_divisors
from hpdsl.errors import SpecError
from hpdsl.diagnostics import Diagnostic, Source
from hpdsl.resources import stdlib_files
from hpdsl.syntax import parse_source, parse_text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DIMS = "hidden 1024  heads 8  vocab 1000  ffn_width 4096"
LINEAR = "linear { key_heads 8  key_head_dim 64  value_heads 16  value_head_dim 64  conv 4 }"


def _check(text: str, *, stdlib: bool = True) -> tuple[Diagnostic, ...]:
    sources = [Source("case.hpf", text)]
    if stdlib:
        sources += [Source(name, path.read_text()) for name, path in stdlib_files()]
    return check_files([parse_source(source) for source in sources])[1]


def _one(text: str, code: str) -> Diagnostic:
    diagnostics = _check(text)
    assert [d.code for d in diagnostics] == [code], diagnostics
    return diagnostics[0]


def _at(diagnostic: Diagnostic, text: str) -> str:
    """Return the source text the diagnostic's span covers (one line)."""
    line = text.splitlines()[diagnostic.span.line - 1]
    return line[diagnostic.span.col - 1:diagnostic.span.end_col - 1]


# --- what passes -------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.hpf")), ids=lambda p: p.name)
def test_every_example_checks_clean(path: Path) -> None:
    assert _check(path.read_text()) == ()


def test_a_model_without_a_profile_takes_the_default_one() -> None:
    assert _check(f"model m {{ {DIMS}  layers 4  mtp 1 }}") == ()


def test_a_minimal_model_needs_only_the_required_fields() -> None:
    assert _check(f"model m : qwen {{ {DIMS}  layers 1 }}") == ()


def test_flags_alone_and_false_are_both_bools() -> None:
    assert _check(f"model m : qwen {{ {DIMS}  layers 2  qk_norm  tie_embeddings false }}") == ()


# --- messages, hints and spans ----------------------------------------------------


def test_unknown_profile_suggests_the_close_one() -> None:
    text = f"model m : qwen35 {{ {DIMS}  layers 4 }}"
    diagnostic = _one(text, "unknown-profile")
    assert _at(diagnostic, text) == "qwen35"
    assert diagnostic.hint is not None and "qwen3_5" in diagnostic.hint


def test_unknown_block_field_suggests_the_close_one() -> None:
    text = f"model m : qwen {{ {DIMS}  layers 4  moe {{ experts 8  topk 2  expert_width 64 }} }}"
    diagnostics = _check(text)
    assert sorted(d.code for d in diagnostics) == ["incomplete-block", "unknown-field"]
    unknown = next(d for d in diagnostics if d.code == "unknown-field")
    assert _at(unknown, text) == "topk" and "top_k" in (unknown.hint or "")


def test_a_block_name_used_as_a_field_says_how_to_write_the_block() -> None:
    diagnostic = _one(f"model m : qwen {{ {DIMS}  layers 4  moe 8 }}", "unknown-field")
    assert "moe { ... }" in (diagnostic.hint or "")


def test_field_type_names_what_was_found() -> None:
    text = f"model m : qwen {{ {DIMS}  layers true }}"
    diagnostic = _one(text, "field-type")
    assert _at(diagnostic, text) == "true"
    assert "takes an int" in diagnostic.message and "`true`" in diagnostic.message


def test_non_positive_field_points_at_the_literal() -> None:
    text = f"model m : qwen {{ {DIMS}  layers 4  head_dim -64 }}"
    diagnostic = _one(text, "non-positive-field")
    assert _at(diagnostic, text) == "-64" and "at least 1" in diagnostic.message


def test_missing_fields_are_listed_at_the_model_name() -> None:
    text = "model m : qwen { hidden 1024  layers 4  ffn_width 4096 }"
    diagnostic = _one(text, "missing-field")
    assert _at(diagnostic, text) == "m"
    assert "'heads'" in diagnostic.message and "'vocab'" in diagnostic.message


def test_heads_not_divisible_lists_the_divisors() -> None:
    text = "model m : qwen { hidden 1024  layers 4  heads 12  kv_heads 5  vocab 1000  ffn_width 4096 }"
    diagnostic = _one(text, "heads-not-divisible")
    assert _at(diagnostic, text) == "5"
    assert "1, 2, 3, 4, 6, 12" in (diagnostic.hint or "")


def test_stack_count_mismatch_says_both_numbers_at_the_stack() -> None:
    text = f"model m : qwen3_5 {{ {DIMS}  layers 48  {LINEAR}\n  stack [linear_attention * 3, full_attention] * 13 }}"
    diagnostic = _one(text, "stack-count-mismatch")
    assert "52" in diagnostic.message and "48" in diagnostic.message
    assert _at(diagnostic, text) == "stack"


def test_layer_types_too_short_says_both_numbers() -> None:
    text = f"model m : qwen {{ {DIMS}  layers 3  layer_types [decoder, decoder] }}"
    diagnostic = _one(text, "layer-types-too-short")
    assert "2 layers" in diagnostic.message and "layers 3" in diagnostic.message


def test_unknown_layer_types_are_a_warning_with_the_kinds_listed() -> None:
    text = f"model m : qwen {{ {DIMS}  layers 2  layer_types [sliding, decoder] }}"
    diagnostic = _one(text, "layer-types-unknown-kind")
    assert diagnostic.severity == "warning" and _at(diagnostic, text) == "sliding"
    assert "'decoder'" in (diagnostic.hint or "")


def test_unknown_stack_kind_suggests_the_close_one() -> None:
    text = f"model m : deepseek {{ {DIMS}  layers 2  stack [dense, mo] }}"
    diagnostic = _one(text, "unknown-kind")
    assert _at(diagnostic, text) == "mo" and diagnostic.hint == "did you mean 'moe'?"


def test_stack_conflict_points_at_the_later_statement() -> None:
    text = f"model m : qwen {{ {DIMS}  layers 2\n  layer_types [decoder, decoder]\n  stack [decoder * 2] }}"
    diagnostic = _one(text, "stack-conflict")
    assert diagnostic.span.line == 3 and _at(diagnostic, text) == "stack"


def test_odd_encoder_decoder_points_at_the_layer_count() -> None:
    text = f"model m : t5 {{ {DIMS}  layers 7 }}"
    diagnostic = _one(text, "odd-encoder-decoder")
    assert _at(diagnostic, text) == "7" and "7" in diagnostic.message


def test_missing_moe_dims_points_at_the_profile_of_a_derived_stack() -> None:
    text = f"model m : deepseek {{ {DIMS}  layers 4 }}"
    diagnostic = _one(text, "missing-moe-dims")
    assert _at(diagnostic, text) == "deepseek"


def test_an_all_dense_deepseek_stack_needs_no_moe_block() -> None:
    assert _check(f"model m : deepseek {{ {DIMS}  layers 3  first_k_dense 5  mtp 1 }}") == ()


def test_missing_linear_dims_points_at_the_first_linear_layer() -> None:
    text = f"model m : qwen3_5 {{ {DIMS}  layers 2  stack [full_attention, linear_attention] }}"
    diagnostic = _one(text, "missing-linear-dims")
    assert _at(diagnostic, text) == "linear_attention"


# --- the checks carry on ---------------------------------------------------------


def test_an_unknown_profile_still_gets_its_stack_counted() -> None:
    diagnostics = _check(f"model m : nowhere {{ {DIMS}  layers 4  stack [a * 0, b] }}")
    assert sorted(d.code for d in diagnostics) == [
        "stack-count-mismatch", "stack-zero-count", "unknown-profile"]


def test_a_duplicate_model_body_is_checked_too() -> None:
    text = f"model m : qwen {{ {DIMS}  layers 2 }}\nmodel m : qwen {{ {DIMS}  layers 0 }}"
    assert sorted(d.code for d in _check(text)) == ["duplicate-model", "non-positive-field"]


def test_a_huge_stack_is_counted_without_expanding_it() -> None:
    text = (f"model m : qwen3_5 {{ {DIMS}  layers 4  {LINEAR}\n"
            "  stack [full_attention, [linear_attention, full_attention] * 1000] * 1000000 }")
    diagnostic = _one(text, "stack-too-large")
    assert "2001000000 layers" in diagnostic.message
    assert (diagnostic.span.line, diagnostic.span.col) == (2, 3)


def test_a_stack_over_the_layer_cap_is_an_error_not_an_empty_stack() -> None:
    text = (f"model m : qwen3_5 {{ {DIMS}  layers 1048577  {LINEAR}\n"
            "  stack [linear_attention, full_attention * 524288] * 2 }")
    codes = [d.code for d in _check(text)]
    assert codes == ["field-too-large", "stack-too-large"]


def test_a_stack_of_more_runs_than_a_model_may_have_is_an_error_at_stack() -> None:
    text = (f"model m : qwen3_5 {{ {DIMS}  layers 1048576  {LINEAR}\n"
            "  stack [linear_attention, full_attention] * 524288 }")
    diagnostic = _one(text, "too-many-groups")
    assert "1048576 runs" in diagnostic.message and "65,536 groups" in diagnostic.message
    assert (diagnostic.span.line, diagnostic.span.col) == (2, 3)


def test_a_literal_beyond_2_62_is_an_error_at_the_literal() -> None:
    with pytest.raises(SpecError) as caught:
        parse_text("model m { heads 9223372036854775807  kv_heads 3 }", "case.hpf")
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.code == "literal-too-large"
    assert (diagnostic.span.line, diagnostic.span.col) == (1, 17)


def test_the_divisors_hint_is_quick_for_the_largest_heads() -> None:
    start = time.perf_counter()
    text = f"model m : qwen3_5 {{ {DIMS.replace('heads 8', 'heads 4611686018427387903')}  kv_heads 3 }}"
    codes = [d.code for d in _check(text)]
    assert "field-too-large" in codes
    assert small_divisors((1 << 62) - 1, 12) == [1, 3]
    assert time.perf_counter() - start < 1


def test_without_valid_layers_no_stack_is_derived() -> None:
    codes = [d.code for d in _check(f"model m : t5 {{ {DIMS}  layers \"12\" }}")]
    assert codes == ["field-type"]


def test_many_problems_in_one_model_are_all_reported() -> None:
    text = ("model m : deepseek { hidden 0  heads 8  kv_heads 3  vocab 1000  layers 4  ffn_width 64  norm rms\n"
            "  mla { rope_dim 64 }  stack [dense, moe * 0, moe * 2] }")
    assert sorted(d.code for d in _check(text)) == [
        "heads-not-divisible", "incomplete-block", "missing-moe-dims", "non-positive-field",
        "stack-count-mismatch", "stack-zero-count", "unknown-choice"]
