"""A mixer's saved activations are its family's `saved` terms (docs/language.md, "Saved activations").

The shipped mixers' terms ride with their pricing columns, evaluated on the layer's dims. An
author's family prices what it declares: split over tp as its layout splits the module (whole on
every tp rank with `replicate`, or when the layout replicates the module), per token of the rank's
chunk, kept under selective recompute and dropped under full recompute; a family with none prices
nothing of its module beyond the layer's input, and `hpdsl check` says so at the binding.
"""

from __future__ import annotations

import attrs
import pytest
from cost_builders import example

from hpdsl.api import check_sources, compile_sources
from hpdsl.cost import bind
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.context import scalar_context
from hpdsl.cost.formulas.memory import activation, column_act_coeffs
from hpdsl.diagnostics import Source
from hpdsl.model.strategy import Strategy

JAMBA = """
model jamba_small : jamba {
  hidden 64  layers 2  heads 4  kv_heads 2  vocab 128  ffn_width 96
  moe { experts 4  top_k 2  expert_width 96 }
  ssm { ssm_state 8  ssm_conv 4  ssm_expand 2  ssm_dt_rank 4 }
  stack [mamba_dense, attention_dense]
}
"""

OWN = """
family split_ssm {
  factory "acme.ssm:Split"
  variant plain "acme.ssm:Split" default params(w_in, w_out)
  layout {
    w_in.weight  (2 * ssm_expand * hidden, hidden) colwise
    w_out.weight (hidden, ssm_expand * hidden)     rowwise
  }
  cost {
    SAVED
  }
}
profile acme {
  kind ssm_layer {
    attention ssm
    slots { ssm split_ssm }
    ops { attMM 4  attBMM 0  ffMM 3  softmax 0  dropout 0  normOp 2  gather 4  headCast 0  ffAct 1  linrec 0 }
  }
}
model acme_small : acme {
  hidden 32  layers 2  heads 4  vocab 100  ffn_width 64
  ssm { ssm_state 4  ssm_conv 4  ssm_expand 2 }
  stack [ssm_layer * 2]
}
"""
TERMS = """saved scan = 3 * ssm_expand * hidden + 2 * ssm_state
    saved scan = hidden replicate
    saved scan = 7 * hidden if ssm_proj_bias"""


def _column(source: str, name: str, kind: str):
    registry = compile_sources([Source(f"{name}.hpf", source)])
    model = registry.models[name]
    columns = model_columns(bind(model, registry.profile(model.profile), families=registry.families))
    return columns, columns.layer_column(kind)


def test_mamba_saves_what_its_family_declares() -> None:
    columns, column = _column(JAMBA, "jamba_small", "mamba_dense")
    inner, dt_rank, state = 2 * 64, 4, 8
    assert [(t.name, t.t, t.replicated) for t in column.saved] == [("scan", 5 * inner + dt_rank + 2 * state, False)]
    # The layout replicates Mamba on every tp rank: its saved tensors are whole there, not divided by t.
    coeffs = column_act_coeffs(column, columns)
    assert "ssm" in column.whole and coeffs.whole_c == 5 * inner + dt_rank + 2 * state
    # The attention layer's tensors are its family's terms too (families/attention.hpf).
    attention = [(t.name, t.bytes, t.flash) for t in columns.layer_column("attention_dense").saved]
    assert attention == [("attBMM", "compute", None), ("softmax", "softmax", False), ("softmax", "mask", False),
                         ("softmax", "fp32", True), ("headCast", "cast", False), ("mixer", "compute", None)]


def test_gated_delta_net_saves_what_its_family_declares() -> None:
    columns = model_columns(example("qwen3_next_80b_a3b"))
    column = columns.layer_column("linear_attention")
    # q, k: 16 heads of 128; v: 32 heads of 128; the conv's input and output, β and the decay per value head.
    # Once per mixer, the core output and the gate z with its activation, 32 value heads of 128.
    assert [(t.name, t.t) for t in column.saved] == [("linrec", 2 * (2 * 16 * 128 + 32 * 128) + 2 * 32),
                                                     ("mixer", 3 * 32 * 128)]
    assert {t.name for t in columns.layer_column("full_attention").saved} == {
        "attBMM", "softmax", "headCast", "qkNorm", "mixer"}


def test_an_authors_terms_split_as_the_layout_and_replicate_stays_whole() -> None:
    columns, column = _column(OWN.replace("SAVED", TERMS), "acme_small", "ssm_layer")
    plain_columns, plain = _column(OWN.replace("SAVED", ""), "acme_small", "ssm_layer")
    inner, state, h = 64, 4, 32
    with_terms, without = column_act_coeffs(column, columns), column_act_coeffs(plain, plain_columns)
    # The `if ssm_proj_bias` term is left out: the model does not set it.
    assert with_terms.t_c - without.t_c == 3 * inner + 2 * state  # colwise/rowwise layout: divided by t
    assert with_terms.whole_c - without.whole_c == h              # `replicate`: whole on every tp rank
    assert without.whole_c == 0 and "ssm" not in column.whole
    run = columns.cost_model.profile.run
    for tp, cp in ((1, 1), (2, 1), (2, 2)):
        strategy = Strategy(tp=tp, cp=cp, seq_len=512)
        x = scalar_context(strategy, run)
        kept = [a - b for a, b in zip(activation(with_terms, x), activation(without, x), strict=True)]
        tokens = 512 / cp  # micro-batch 1: the rank's chunk of the sequence
        per_token = x.compute_bytes * ((3 * inner + 2 * state) / tp + h)
        assert kept == pytest.approx([tokens * per_token, tokens * per_token, 0.0])  # none, selective, full


def test_an_authors_family_without_saved_terms_is_warned_of_and_prices_none() -> None:
    source = OWN.replace("SAVED", "flops scan = 2 * ssm_expand * hidden * ssm_state")
    diagnostics = check_sources([Source("acme.hpf", source)]).diagnostics
    found = [(d.code, d.severity, d.span.line) for d in diagnostics]
    binding = next(n for n, line in enumerate(source.splitlines(), start=1) if "slots { ssm split_ssm }" in line)
    assert found == [("unpriced-activations", "warning", binding)]
    assert "split_ssm" in diagnostics[0].message and "saved scan" in (diagnostics[0].hint or "")
    columns, column = _column(source, "acme_small", "ssm_layer")
    coeffs = column_act_coeffs(column, columns)
    ffn_only = column_act_coeffs(attrs.evolve(column, config=attrs.evolve(column.config, ops={
        **column.config.ops, "attMM": 0})), columns)
    assert column.saved == () and coeffs.t_c == ffn_only.t_c and coeffs.whole_c == 0


ATTENTION = """
family my_attention {
  factory "acme.attn:A"
  variant plain "acme.attn:A" default params(qkv, out)
  layout {
    qkv.weight (3 * heads * head_dim, hidden) colwise by heads
    out.weight (hidden, heads * head_dim)     rowwise by heads
  }
  cost {
    saved mixer = heads * head_dim
    SCORES
  }
}
profile acme_attn {
  slots { attention my_attention }
  kind layer {
    ops { attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }
  }
}
model acme_attn_small : acme_attn {
  hidden 64  layers 2  heads 4  vocab 100  ffn_width 96
  stack [layer * 2]
}
"""
SCORES = """saved softmax = 2 * heads * keys at fp32 recompute selective without flash
    saved softmax = heads at fp32 recompute selective with flash"""


def _layer(source: str, name: str):
    registry = compile_sources([Source(f"{name}.hpf", source)])
    model = registry.models[name]
    columns = model_columns(bind(model, registry.profile(model.profile), families=registry.families))
    return columns, next(c for c in columns.columns if c.role == "layer")


def test_an_authors_attention_prices_its_own_scores_and_flash_statistics() -> None:
    (columns, column), (plain_columns, plain) = (_layer(ATTENTION.replace("SCORES", scores), "acme_attn_small")
                                                  for scores in (SCORES, ""))
    with_terms, without = column_act_coeffs(column, columns), column_act_coeffs(plain, plain_columns)
    assert (with_terms.sc_b, with_terms.flash_b) == (2 * 4 * 4, 4 * 4) and without.sc_b == without.flash_b == 0
    assert without.t_c == with_terms.t_c and without.sp_c == with_terms.sp_c  # the output: split as the heads
    run = columns.cost_model.profile.run
    for tp, flash in ((1, False), (2, False), (1, True), (2, True)):
        x = scalar_context(Strategy(tp=tp, seq_len=256, flash_attention=flash), run)
        kept = [a - b for a, b in zip(activation(with_terms, x), activation(without, x), strict=True)]
        # Per token: without flash 2 fp32 scores per head and key (the whole 256-key row), with flash one fp32
        # statistic per head; both split over tp, dropped by selective and full recompute.
        per_token = (4 * 4 if flash else 256 * 2 * 4 * 4) / tp
        assert kept == [256 * per_token, 0.0, 0.0]
