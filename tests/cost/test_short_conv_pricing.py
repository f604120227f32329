"""LFM2's short convolution (families/short_conv.hpf) is priced by its own terms, not Mamba's.

Parameters: the layout's sum. Matmuls: its rank ≥ 2 weights, in_proj and out_proj the attMM
term, the taps (a convolution's weight: ssm_conv multiply-adds per channel and token) the conv
term. No state: no scan FLOPs. Activations: its family's `saved scan`, six
hidden-wide tensors per token (in_proj's B, C, x; B·x; the convolution's output; C·conv).
"""

from __future__ import annotations

import attrs

from hpdsl.api import compile_sources
from hpdsl.cost import bind, parameters
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.flops import layer_flop_terms
from hpdsl.cost.formulas.memory import layer_act_coeffs
from hpdsl.diagnostics import Source

H, TAPS = 64, 3
SMALL = f"""
model lfm2_small : lfm2 {{
  hidden {H}  layers 2  heads 4  kv_heads 2  vocab 96  ffn_width 128
  ssm {{ ssm_state 0  ssm_conv {TAPS}  ssm_expand 1  ssm_conv_bias }}
  stack [conv, full_attention]
}}
"""


def _cost():
    registry = compile_sources([Source("lfm2_small.hpf", SMALL)])
    return bind(registry.models["lfm2_small"], registry.profile("lfm2"), families=registry.families)


def test_the_mixer_is_its_layout() -> None:
    per_kind = parameters(_cost()).per_kind
    assert per_kind["conv"].attention == 3 * H * H + 3 * H + H * TAPS + H + H * H + H == 16_896


def test_no_state_no_scan_and_the_taps_are_matmuls() -> None:
    cost = _cost()
    conv = cost.kind_config("conv")
    assert conv.mixer_macs == 3 * H * H + H * TAPS + H * H
    terms = layer_flop_terms(conv, model_columns(cost).layer_column("conv").matmuls)
    assert (terms["scan"].per_token(0.0), terms["scanUpdate"].per_token(0.0)) == (0.0, 0.0)  # short_conv declares none
    assert (terms["attMM"].t, terms["conv"].t) == (2 * (3 * H * H + H * H), 2 * H * TAPS)  # projections, taps


def test_it_saves_six_hidden_wide_tensors_per_token() -> None:
    cost = _cost()
    column, run = model_columns(cost).layer_column("conv"), cost.profile.run
    assert [(term.name, term.t) for term in column.saved] == [("scan", 6 * H)]  # its family's `saved scan`
    without_terms = layer_act_coeffs(column.config, run, whole=column.whole, saved=())
    priced = layer_act_coeffs(column.config, run, whole=column.whole, saved=column.saved)
    # The layout replicates the mixer: its tensors are whole on every tp rank, not divided by t.
    assert (priced.whole_c - without_terms.whole_c, priced.t_c) == (6 * H, without_terms.t_c)
