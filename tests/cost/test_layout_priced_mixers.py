"""A state-space mixer is priced from its family's layout: an author's own family needs no Python.

The ssm flavour's parameters are the sum of the bound family's layout entries and
its weight matmuls the per-token multiply-adds of its module weights of rank ≥ 2
(hpdsl.ir.layouts.layout_tally); the scan is linear in the sequence.
"""

from __future__ import annotations

import pytest

from hpdsl.api import compile_sources
from hpdsl.cost import bind, parameters
from hpdsl.cost.flops import layer_flop_terms
from hpdsl.diagnostics import Source

OWN = """
// An author's own diagonal SSM: no convolution, no time-step projection.
family tiny_ssm {
  factory "acme.ssm:TinySSM"
  variant plain "acme.ssm:TinySSM" default params(w_in, A, w_out)
  layout {
    w_in.weight  (2 * ssm_expand * hidden, hidden) replicate
    w_in.bias    (ssm_proj_bias * 2 * ssm_expand * hidden) replicate
    A            (ssm_expand * hidden, ssm_state)  replicate
    w_out.weight (hidden, ssm_expand * hidden)     replicate
  }
}
profile acme {
  kind ssm_layer {
    attention ssm
    slots { ssm tiny_ssm }
    ops { attMM 4  attBMM 0  ffMM 3  softmax 0  dropout 0  normOp 2  gather 4  headCast 0  ffAct 1  linrec 0 }
  }
}
model acme_small : acme {
  hidden 32
  layers 3
  heads 4
  vocab 100
  ffn_width 64
  ssm { ssm_state 4  ssm_conv 4  ssm_expand 2  ssm_dt_rank 2  ssm_proj_bias }
  stack [ssm_layer * 3]
}
"""


@pytest.fixture(scope="module")
def own():
    registry = compile_sources([Source("acme.hpf", OWN)])
    model = registry.models["acme_small"]
    return bind(model, registry.profile("acme"), families=registry.families)


def test_an_authors_family_prices_its_layout(own) -> None:
    h, inner, state = 32, 64, 4
    mixer = 2 * inner * h + 2 * inner + inner * state + h * inner
    layer = parameters(own).per_kind["ssm_layer"]
    assert layer.attention == mixer == 6_528
    assert layer.total == mixer + 2 * h + 3 * h * 64
    assert own.kind_config("ssm_layer").mixer_macs == 2 * inner * h + h * inner  # A is no module weight


def test_the_scan_is_linear_in_the_sequence(own) -> None:
    terms = layer_flop_terms(own.kind_config("ssm_layer"))
    assert terms["scan"].t == 2 * 64 * 4 and terms["scan"].ts == 0
    assert terms["attMM"].t == 2 * (2 * 64 * 32 + 32 * 64)  # 2 FLOPs per multiply-add of each module weight
    assert all(term.ts == 0 for term in terms.values())  # no score work: nothing grows with s²


def test_flags_in_dims_leave_parameters_out() -> None:
    """ssm_conv_bias false and ssm_proj_bias true: exact against transformers' Jamba on the meta device."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    text = """
model biased : jamba {
  hidden 64
  layers 2
  heads 4
  vocab 128
  ffn_width 96
  ssm { ssm_state 8  ssm_conv 4  ssm_expand 2  ssm_dt_rank 4  ssm_proj_bias  ssm_norms }
  stack [mamba_dense, attention_dense]
}
"""
    registry = compile_sources([Source("biased.hpf", text)])
    count = parameters(bind(registry.models["biased"], registry.profile("jamba"), families=registry.families))
    config = transformers.JambaConfig(hidden_size=64, num_hidden_layers=2, intermediate_size=96,
                                      num_attention_heads=4, num_key_value_heads=4, num_experts=1,
                                      mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4,
                                      mamba_conv_bias=False, mamba_proj_bias=True, vocab_size=128,
                                      attn_layer_period=2, attn_layer_offset=1)
    with torch.device("meta"):
        hf = transformers.JambaForCausalLM(config)
    assert count.total == sum(p.numel() for p in hf.parameters())
