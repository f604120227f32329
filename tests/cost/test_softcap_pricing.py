"""Soft-capping priced with the scores: 3 FLOPs per score element and per logit, nothing else changes.

docs/cost-model.md, "Soft-capping and the query scale": attn_softcap adds the
`softcap` term (3·a per key and token, per softmax unit, recomputed with QKᵀ under
flash and selective recompute), final_softcap the `logitCap` term (3·v per token,
vocab-parallel); attn_scale_dim changes no term; no parameter moves.
"""

from __future__ import annotations

import attrs

from hpdsl.api import compile_sources
from hpdsl.cost import bind, parameters
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.flops import SOFT_CAP, layer_flop_terms, output_flop_terms
from hpdsl.diagnostics import Source

SPEC = """model m : gemma2 {
  hidden 64  layers 2  heads 4  kv_heads 2  head_dim 16  vocab 101  ffn_width 96  sliding_window 8
  norm_offset  embed_scale  activation gelu_tanh  %s
  stack [sliding_attention, full_attention]
}
"""


def _cost(modifiers: str):  # noqa: ANN202 (a CostModel)
    registry = compile_sources([Source("m.hpf", SPEC % modifiers)])
    return bind(registry.models["m"], registry.profile("gemma2"))


def _terms(cost, kind: str):  # noqa: ANN001, ANN202 (a CostModel; FlopCoeffs by term)
    """Return one layer's FLOP terms, its weight matmuls from its slots' layouts."""
    return layer_flop_terms(cost.kind_config(kind), model_columns(cost).layer_column(kind).matmuls)


def test_the_score_cap_is_three_flops_per_score_element_with_the_scores() -> None:
    capped = _terms(_cost("attn_softcap 50.0"), "full_attention")
    plain = _terms(_cost(""), "full_attention")
    heads, softmaxes = 4, 1
    assert capped["softcap"] == attrs.evolve(capped["softcap"], ts=SOFT_CAP * heads * softmaxes,
                                             sel_ts=SOFT_CAP * heads * softmaxes)
    assert capped["softcap"].ts == 12.0 and plain["softcap"].ts == 0.0
    assert {k: v for k, v in capped.items() if k != "softcap"} == {k: v for k, v in plain.items() if k != "softcap"}
    sliding = _terms(_cost("attn_softcap 50.0"), "sliding_attention")
    assert sliding["softcap"].ts == 12.0  # the window then bounds its keys, as the other score terms'


def test_the_logit_cap_is_three_flops_per_logit_vocab_parallel() -> None:
    columns = model_columns(_cost(""))
    head = columns.columns[columns.output].matmuls
    assert output_flop_terms(64, head, capped_logits=101)["logitCap"].t == 3 * 101
    assert "logitCap" not in output_flop_terms(64, head)


def test_the_query_scale_and_the_caps_change_no_parameter_and_no_flop_term() -> None:
    plain = _cost("")
    scaled = _cost("attn_scale_dim 24")
    for kind in ("full_attention", "sliding_attention"):
        assert _terms(scaled, kind) == _terms(plain, kind)
    everything = _cost("attn_softcap 1.0  final_softcap 0.5  attn_scale_dim 24")
    assert parameters(everything).total == parameters(plain).total
