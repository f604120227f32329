"""Field declarations: what a model, a layout and an import rule may then name, and the hints when they miss.

The codes and lines are pinned by tests/cases/fields/declarations.hpf; these tests pin
the hints and that an author field is used exactly where it is declared.
"""

from __future__ import annotations

from hpdsl.api import check_sources
from hpdsl.diagnostics import Diagnostic, Source

OPS = "ops { attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }"
PROFILE = f"""profile opt_like {{
  field word_embed_proj_dim: int >= 1 "the width of OPT's projected embedding"
  kind decoder {{ {OPS} }}
}}
"""
MODEL = """model m : {profile} {{
  hidden 64  layers 1  heads 4  vocab 96  ffn_width 128
  {stated}
}}
"""


def errors(*texts: str) -> list[Diagnostic]:
    """Return the errors of checking `texts` with the standard library, each its own file."""
    sources = [Source(f"t{i}.hpf", text) for i, text in enumerate(texts)]
    return [d for d in check_sources(sources, stdlib=True).diagnostics if d.is_error]


def test_a_model_of_the_declaring_profile_states_the_field_and_another_profile_s_may_not() -> None:
    assert errors(PROFILE, MODEL.format(profile="opt_like", stated="word_embed_proj_dim 32")) == []
    other = errors(PROFILE, MODEL.format(profile="llama2", stated="word_embed_proj_dim 32"))
    assert [(d.code, d.span.file, d.span.line) for d in other] == [("unknown-field", "t1.hpf", 3)]


def test_a_stated_author_field_is_checked_against_its_declaration() -> None:
    found = errors(PROFILE, MODEL.format(profile="opt_like", stated="word_embed_proj_dim 0"))
    assert [d.code for d in found] == ["non-positive-field"]
    found = errors(PROFILE, MODEL.format(profile="opt_like", stated="word_embed_proj_dim true"))
    assert [d.code for d in found] == ["field-type"]


def test_a_required_author_field_must_be_stated() -> None:
    required = PROFILE.replace('>= 1 "the width', '>= 1 required "the width')
    found = errors(required, MODEL.format(profile="opt_like", stated=""))
    assert [d.code for d in found] == ["missing-field"] and "word_embed_proj_dim" in found[0].message


def test_a_near_miss_gets_a_did_you_mean_in_a_model_and_in_a_layout() -> None:
    found = errors(PROFILE, MODEL.format(profile="opt_like", stated="word_embed_proj 32"))
    assert [(d.code, d.hint) for d in found] == [("unknown-field", "did you mean 'word_embed_proj_dim'?")]
    family = """family proj {
      factory "hpdsl.torch.modules:GatedMLP"
      variant v "hpdsl.torch.modules:GatedMLP" default params(p)
      layout { p.weight (word_embed_proj, hidden) replicate }
    }"""
    found = errors(PROFILE, family)
    assert [(d.code, d.hint) for d in found] == [("unknown-dim-field", "did you mean 'word_embed_proj_dim'?")]


def test_a_name_nobody_declares_stays_an_unknown_dim_field_with_the_way_to_declare_it() -> None:
    family = """family proj {
      factory "hpdsl.torch.modules:GatedMLP"
      variant v "hpdsl.torch.modules:GatedMLP" default params(p)
      layout { p.weight (qqq, hidden) replicate }
    }"""
    [found] = errors(family)
    assert found.code == "unknown-dim-field" and (found.span.line, found.span.col) == (4, 26)
    assert found.hint is not None and "field qqq: int >= 1" in found.hint


def test_every_declaration_problem_is_reported_in_one_check() -> None:
    bad = """profile p {
      field a: float >= 1 "x"
      field hidden: bool "x"
      field b: int >= 3 <= 2 "x"
      field c: int in nowhere "x"
      kind decoder { OPS }
    }""".replace("OPS", OPS)
    found = [(d.code, d.span.line) for d in errors(bad)]
    assert found == [("bad-field-declaration", 2), ("field-redeclared", 3), ("bad-field-declaration", 4),
                     ("unknown-field-block", 5)]


def test_a_stale_standard_table_is_reported_on_the_standard_declaration() -> None:
    # A standard field edited in fields/model.hpf without rewriting fields/model.fields.json.
    from hpdsl.resources import data_dir

    text = (data_dir("fields") / "model.hpf").read_text().replace('"hidden size h"', '"hidden size"')
    result = check_sources([Source("<hpdsl>/fields/model.hpf", text)], stdlib=False)
    found = [d for d in result.diagnostics if d.is_error]
    assert [(d.code, d.span.line) for d in found] == [("field-redeclared", 10)]
    assert found[0].hint == "rewrite the table: `python -m hpdsl.ir.lower_fields`"
