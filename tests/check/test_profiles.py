"""Unit tests of check_profiles and of the profile questions hpdsl/scope.py answers."""

from __future__ import annotations

from hpdsl import ast
from hpdsl.check import check_files
from hpdsl.diagnostics import Diagnostic
from hpdsl.resources import data_dir
from hpdsl.scope import kind_flavours, kind_vector, profile_default, profile_kinds
from hpdsl.syntax import parse_text

VECTOR = "attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0"


def _vocabulary() -> ast.File:
    return parse_text((data_dir("profiles") / "ops.hpf").read_text(), "ops.hpf")


def _check(text: str, *, vocabulary: bool = True) -> tuple[Diagnostic, ...]:
    files = [parse_text(text, "case.hpf")] + ([_vocabulary()] if vocabulary else [])
    return check_files(files)[1]


def _profile(text: str) -> ast.Profile:
    item = parse_text(text).items[0]
    assert isinstance(item, ast.Profile)
    return item


def _codes(diagnostics: tuple[Diagnostic, ...]) -> list[str]:
    return [d.code for d in diagnostics]


# --- default kinds ---------------------------------------------------------


def test_one_kind_is_the_default() -> None:
    assert profile_default(_profile(f"profile p {{ kind only {{ ops {{ {VECTOR} }} }} }}")) == "only"


def test_several_kinds_without_default_give_none() -> None:
    text = f"profile p {{ kind a {{ ops {{ {VECTOR} }} }} kind b from a {{ }} }}"
    assert profile_default(_profile(text)) is None
    assert _check(text) == ()


def test_stated_default_wins() -> None:
    text = f"profile p {{ kind a {{ ops {{ {VECTOR} }} }} kind b from a {{ }} default b }}"
    assert profile_default(_profile(text)) == "b"
    assert _check(text) == ()


def test_default_must_be_a_kind() -> None:
    diagnostics = _check(f"profile p {{ default moe\n kind dense {{ ops {{ {VECTOR} }} }} }}")
    assert _codes(diagnostics) == ["unknown-default-kind"]
    assert (diagnostics[0].span.line, diagnostics[0].span.col) == (1, 21)
    assert "'dense'" in diagnostics[0].message


# --- inheritance -----------------------------------------------------------


def test_inherited_vector_is_overlaid_by_the_kind() -> None:
    profile = _profile(f"profile p {{ kind full {{ ops {{ {VECTOR} }} }}\n"
                       "kind lin from full { attention linear ops { attBMM 0 linrec 1 } } }")
    kinds = profile_kinds(profile)
    vector = {op: c.count.value for op, c in kind_vector(kinds["lin"], kinds).items()}
    assert vector["attBMM"] == 0 and vector["linrec"] == 1 and vector["attMM"] == 4
    assert len(vector) == 10
    assert kind_flavours(kinds["lin"], kinds) == ("linear", None)


def test_flavours_are_inherited_unless_restated() -> None:
    profile = _profile(f"profile p {{ kind d {{ ffn dense attention linear ops {{ {VECTOR} }} }}\n"
                       "kind m from d { ffn moe } kind n from m { } }")
    kinds = profile_kinds(profile)
    assert kind_flavours(kinds["m"], kinds) == ("linear", "moe")
    assert kind_flavours(kinds["n"], kinds) == ("linear", "moe")


def test_a_grandchild_inherits_through_its_parent() -> None:
    text = (f"profile p {{ kind a {{ ops {{ {VECTOR} }} }} kind b from a {{ ops {{ attMM 5 }} }}\n"
            "kind c from b { ops { ffMM 2 } } }")
    assert _check(text) == ()
    kinds = profile_kinds(_profile(text))
    vector = kind_vector(kinds["c"], kinds)
    assert (vector["attMM"].count.value, vector["ffMM"].count.value) == (5, 2)


def test_a_cycle_is_reported_once_at_the_closing_kind() -> None:
    text = "profile p {\nkind a from c { }\nkind b from a { }\nkind c from b { }\n}"
    diagnostics = _check(text)
    assert _codes(diagnostics) == ["kind-inheritance-cycle"]
    assert diagnostics[0].span.line == 4
    assert "c from b from a from c" in diagnostics[0].message


def test_an_unknown_base_suppresses_the_missing_ops_cascade() -> None:
    diagnostics = _check("profile p { kind a from nowhere { ops { attMM 4 } } }")
    assert _codes(diagnostics) == ["unknown-kind"]


# --- op vectors ------------------------------------------------------------


def test_missing_ops_are_listed_in_vocabulary_order() -> None:
    diagnostics = _check("profile p { kind a { ops { linrec 0  attMM 4  gather 4  ffMM 3 } } }")
    assert _codes(diagnostics) == ["missing-op-count"]
    assert "attBMM, softmax, dropout, normOp, headCast, ffAct" in diagnostics[0].message
    assert diagnostics[0].hint == "declare 0 for an op the layer does not run"
    assert diagnostics[0].span.col == 18  # the kind's name


def test_unknown_op_suggests_the_closest() -> None:
    diagnostics = _check(f"profile p {{ kind a {{ ops {{ {VECTOR}  sofmax 1 }} }} }}")
    assert _codes(diagnostics) == ["unknown-op"]
    assert diagnostics[0].hint == "did you mean 'softmax'?"


def test_count_literals_are_checked_precisely() -> None:
    text = "profile p { kind a { ops { " + VECTOR.replace("ffAct 1", "ffAct 1.0").replace(
        "dropout 0", "dropout -2") + " } } }"
    diagnostics = _check(text)
    assert sorted(_codes(diagnostics)) == ["count-not-integer", "negative-count"]
    spans = {d.code: text[d.span.col - 1:d.span.end_col - 1] for d in diagnostics}
    assert spans == {"count-not-integer": "1.0", "negative-count": "-2"}


def test_no_vocabulary_is_reported_once_and_suppresses_op_checks() -> None:
    diagnostics = _check("profile p { kind a { ops { foo 1 } } }\nprofile q { kind b { } }",
                         vocabulary=False)
    assert _codes(diagnostics) == ["no-vocabulary"]
    assert diagnostics[0].span.line == 1


def test_an_own_vocabulary_replaces_the_standard_one() -> None:
    text = 'vocabulary { mm "matmuls"  act "activations" }\nprofile p { kind a { ops { mm 2 act 1 } } }'
    assert _check(text, vocabulary=False) == ()


# --- flavours and settings -------------------------------------------------


def test_flavour_mismatch_is_a_warning() -> None:
    diagnostics = _check(f"profile p {{ kind a {{ attention linear ops {{ {VECTOR} }} }} }}")
    assert [(d.code, d.severity) for d in diagnostics] == [("flavour-mismatch", "warning")]


def test_run_facts_reject_a_bool_for_an_int() -> None:
    diagnostics = _check(f"profile p {{ run {{ grad_bytes = true }} kind a {{ ops {{ {VECTOR} }} }} }}")
    assert _codes(diagnostics) == ["run-fact-type"]
    assert "an integer >= 0" in diagnostics[0].message


def test_facts_may_repeat_for_different_model_types() -> None:
    text = (f'profile p {{ model_types "x" "y"\nfacts "x" {{ qkv_bias = true }}\n'
            f'facts "y" {{ qkv_bias = false }}\nkind a {{ ops {{ {VECTOR} }} }} }}')
    assert _check(text) == ()


def test_a_general_facts_block_overlaps_every_listed_type() -> None:
    text = (f'profile p {{ model_types "x" "y"\nfacts {{ qkv_bias = true }}\n'
            f'facts "y" {{ qkv_bias = false }}\nkind a {{ ops {{ {VECTOR} }} }} }}')
    diagnostics = _check(text)
    assert _codes(diagnostics) == ["duplicate-setting"]
    assert diagnostics[0].span.line == 3 and '"y"' in diagnostics[0].message


def test_model_type_claims_note_the_first_claim() -> None:
    text = (f'profile p {{ model_types "x" kind a {{ ops {{ {VECTOR} }} }} }}\n'
            f'profile q {{ model_types "x" kind a {{ ops {{ {VECTOR} }} }} }}')
    diagnostics = _check(text)
    assert _codes(diagnostics) == ["duplicate-model-type"]
    assert diagnostics[0].span.line == 2
    assert diagnostics[0].notes[0].span.line == 1
    assert "'p'" in diagnostics[0].message


def test_the_shipped_profiles_check_clean() -> None:
    # with the families the standard slot bindings (profiles/slots.hpf) name
    files = [parse_text(path.read_text(), path.name) for folder in ("profiles", "families")
             for path in sorted(data_dir(folder).glob("*.hpf"))]
    assert check_files(files)[1] == ()


# --- split weight rules (a fused tensor cut into parts: GPT-2's c_attn) -----------------


def _split_profile(rule: str) -> str:
    return (f'profile p {{\n  model_types "gpt2"\n  kind k {{ ops {{ {VECTOR} }} }}\n  hf "gpt2" {{\n'
            f'    {rule}\n  }}\n}}\n')


def test_a_split_rule_over_the_models_counts_is_clean() -> None:
    rule = ('weight "h.{i}.attn.c_attn." -> split("layers.{i}.mixer.q_proj.", "layers.{i}.mixer.k_proj.", '
            '"layers.{i}.mixer.v_proj.") by (heads * head_dim, kv_heads * head_dim, kv_heads * head_dim) transposed')
    assert [d for d in _check(_split_profile(rule)) if d.is_error] == []


def test_a_split_size_reading_no_count_is_located_with_a_hint() -> None:
    rule = 'weight "qkv." -> split("q.", "k.", "v.") by (head_dim, head_dims, norm_eps) interleaved hedas'
    errors = [d for d in _check(_split_profile(rule)) if d.is_error]
    assert [(d.code, d.span.line, d.span.col) for d in errors] == [
        ("bad-weight-split", 5, 5 + rule.index("head_dims")), ("bad-weight-split", 5, 5 + rule.index("norm_eps")),
        ("bad-weight-split", 5, 5 + rule.index("hedas"))]
    assert "'head_dims', which is not a model field holding a count" in errors[0].message
    assert "head_dim" in (errors[0].hint or "") and "heads" in (errors[2].hint or "")


def test_a_split_of_other_counts_or_placeholders_is_an_error_per_problem() -> None:
    rule = 'weight "h.{i}.qkv." -> split("l.{i}.q.", "l.{j}.k.", "l.{i}.v") by (heads, heads)'
    errors = [d for d in _check(_split_profile(rule)) if d.is_error]
    assert [(d.code, d.span.col) for d in errors] == [
        ("bad-weight-split", 5 + rule.index("split(")), ("bad-weight-name", 5 + rule.index('"l.{j}')),
        ("bad-weight-name", 5 + rule.index('"l.{i}.v"'))]
    assert errors[0].message == "split names 3 parts but states 2 sizes"
    assert "{i}" in (errors[1].hint or "") and '"model.norm." -> "norm."' in (errors[2].hint or "")
