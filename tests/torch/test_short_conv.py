"""LFM2's gated short convolution (families/short_conv.hpf) against transformers' Lfm2 on the same weights.

The model is the published LFM2.5-VL-1.6B config (tests/data/hf/lfm2_5_vl_1_6b.json, LiquidAI/
LFM2.5-VL-1.6B's config.json; tests/data/hf/SOURCES.md) with its dims scaled down by SMALL, a visible
transformation of the published text_config: its layer_types, conv_L_cache and width adjustment stay.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from hpdsl.api import compile_paths, compile_sources  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.cost.facts.columns import model_columns  # noqa: E402
from hpdsl.cost.formulas.flops import MATMUL_TERMS, forward_flops_by_term, layer_flop_terms  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.modules import ShortConv  # noqa: E402
from tests.importers.hf_configs import published  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

SMALL = dict(hidden_size=64, block_dim=64, conv_dim=64, conv_dim_out=64, num_attention_heads=4, num_heads=4,
             num_key_value_heads=2, vocab_size=128, intermediate_size=192, block_ff_dim=192, block_multiple_of=32)
"""The scaled dims: Lfm2MLP's width is then 32·⌈⌊2·192/3⌋ / 32⌉ = 128."""
BATCH, SEQ = 2, 16


def _config(**overrides: object) -> dict:
    config = published("lfm2_5_vl_1_6b")
    config["text_config"] = {**config["text_config"], **SMALL, **overrides}
    return config


def _registry(config: dict) -> Registry:
    stdlib = compile_paths([ROOT / "profiles", ROOT / "families"])
    imported = import_hf_config(config, profiles=stdlib.profiles, name="lfm2_small")
    return compile_sources([Source("lfm2_small.hpf", imported.text)])


def _transformers(config: dict):
    text = {k: v for k, v in config["text_config"].items() if k not in ("architectures", "model_type")}
    torch.manual_seed(0)
    hf = transformers.Lfm2Config(**text, tie_word_embeddings=True)
    hf._attn_implementation = "eager"
    return transformers.Lfm2ForCausalLM(hf).eval()


@pytest.fixture(scope="module")
def small() -> Registry:
    return _registry(_config())


def test_the_scaled_model_imports_with_transformers_width_and_count(small: Registry) -> None:
    model = small.models["lfm2_small"]
    assert model.ffn_width == 128 and model.ssm_state == 0 and model.ssm_conv == 3
    cost = bind(model, small.profile("lfm2"), families=small.families)
    ours = parameters(cost).total
    assert ours == sum(p.numel() for p in _transformers(_config()).parameters())
    built = build_model(model, registry=small, device="meta")
    assert sum(p.numel() for p in built.parameters()) == ours


@pytest.mark.parametrize("bias", [False, True])
def test_the_mixer_computes_what_transformers_computes(bias: bool) -> None:
    config = _config(conv_bias=bias)
    registry = _registry(config)
    cost = bind(registry.models["lfm2_small"], registry.profile("lfm2"), families=registry.families)
    ours = ShortConv(cost.kind_config("conv"))
    theirs = _transformers(config).model.layers[0].conv
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(BATCH, SEQ, 64)
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)


def test_a_short_conv_has_no_scan_and_its_taps_are_matmuls(small: Registry) -> None:
    cost = bind(small.models["lfm2_small"], small.profile("lfm2"), families=small.families)
    conv = cost.kind_config("conv")
    h, taps = 64, 3
    assert conv.mixer_macs == 3 * h * h + h * taps + h * h
    terms = layer_flop_terms(conv, model_columns(cost).layer_column("conv").matmuls)
    assert terms["scan"].t == terms["scanUpdate"].t == 0.0
    # the projections are attMM, the taps (a convolution's weight) conv: 2 FLOPs per multiply-add each
    assert (terms["attMM"].t, terms["conv"].t) == (2 * (3 * h * h + h * h), 2 * h * taps)
    assert terms["attMM"].t + terms["conv"].t == 2 * conv.mixer_macs


def test_the_built_models_matmul_flops_are_the_estimate(small: Registry) -> None:
    model = small.models["lfm2_small"]
    cost = bind(model, small.profile("lfm2"), families=small.families)
    terms = forward_flops_by_term(cost, batch=BATCH, seq_len=SEQ)
    estimate = sum(terms[c].get(t, 0.0) for c in [*cost.layer_kinds(), "output"] for t in MATMUL_TERMS)
    torch.manual_seed(0)
    built = build_model(model, registry=small, device="cpu", selectors={"attention": {"backend": "eager"}})
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        built(torch.randint(0, 128, (BATCH, SEQ)))
    assert counter.get_total_flops() == estimate
