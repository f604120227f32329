"""The attention modifiers against transformers: docs/language.md's gemma2_tiny gives Gemma 2's logits.

The doc's scaled Gemma-2 (its .hpf cut out of docs/language.md) is built by
hpdsl.torch.build_model; transformers builds Gemma2ForCausalLM from a
Gemma2Config holding the same dims (no published Gemma-2 config.json is vendored:
none was found byte for byte), with random weights and random (1 + w) norm
weights (the q and k projections scaled up, so scores reach the cap), which
are copied into hpdsl's model under the name map below. In
float32 on the CPU both give the same logits to 1e-4: soft-capped scores and
logits, 1/√query_pre_attn_scalar, √hidden embeddings, (1 + w) RMSNorms,
sandwich norms and alternating sliding/full layers. Each modifier, turned off,
changes the logits, so the comparison would catch its absence. Google's published
Gemma-3-4B-it config (tests/data/hf/SOURCES.md), its text_config scaled down,
gives Gemma3ForCausalLM's logits the same way (its (1 + w) QK-norms too).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.api import compile_sources  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch.model import materialize  # noqa: E402
from hpdsl.torch.weights import load_hf_state_dict  # noqa: E402
from tests.importers.hf_configs import published  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SEQ = 12

def _doc_spec() -> str:
    doc = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    return "// gemma2.hpf" + doc.split("```\n// gemma2.hpf", 1)[1].split("```", 1)[0]


def _hf_config(model: Any) -> Any:
    """Return transformers' Gemma2Config with the .hpf model's dims and modifiers."""
    config = transformers.Gemma2Config(
        hidden_size=model.hidden, intermediate_size=model.ffn_width, num_hidden_layers=model.layers,
        num_attention_heads=model.heads, num_key_value_heads=model.kv_heads, head_dim=model.head_dim,
        vocab_size=model.vocab, max_position_embeddings=model.max_positions, sliding_window=model.sliding_window,
        query_pre_attn_scalar=model.attn_scale_dim, attn_logit_softcapping=model.attn_softcap,
        final_logit_softcapping=model.final_softcap, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
        tie_word_embeddings=True, pad_token_id=None, bos_token_id=None, eos_token_id=None)
    config._attn_implementation = "eager"
    return config


def _load(ours: Any, theirs: Any, registry: Registry, profile: str, model_type: str) -> None:
    """Copy transformers' weights into hpdsl's model (the profile's weight rules): random (1 + w) norms, q, k scaled up."""
    state = theirs.state_dict()
    with torch.no_grad():
        for name, tensor in state.items():
            if name.endswith("norm.weight"):  # Gemma's zeros would hide a missing (1 + w)
                tensor.copy_(torch.randn_like(tensor) * 0.2)
            if re.search(r"\.(q|k)_proj\.weight$", name):  # scores of order 1, where the cap of 1.0 bites
                tensor.mul_(8.0)
    load_hf_state_dict(ours, state, registry.profile(profile), model_type, registry.profiles)


@pytest.fixture(scope="module")
def pair() -> tuple[Any, Any]:
    """Return (hpdsl's gemma2_tiny, transformers' Gemma2ForCausalLM) holding the same random weights."""
    registry = compile_sources([Source("gemma2.hpf", _doc_spec())])
    model = registry.models["gemma2_tiny"]
    assert model.layer_types is None and [g.kind for g in model.groups][:2] == ["sliding_attention", "full_attention"]
    ours = materialize(build_model(model, registry=registry, device="meta"), "cpu", seed=0)
    torch.manual_seed(0)
    theirs = transformers.Gemma2ForCausalLM(_hf_config(model)).float().eval()
    assert theirs.config.layer_types[:2] == ["sliding_attention", "full_attention"]
    _load(ours, theirs, registry, "gemma2", "gemma2")
    count = sum(p.numel() for p in ours.parameters())
    estimate = parameters(bind(model, registry.profile("gemma2"))).total
    assert count == sum(p.numel() for p in theirs.parameters()) == estimate
    return ours.eval(), theirs


def _ids(seed: int = 1) -> Any:
    return torch.randint(0, 101, (2, SEQ), generator=torch.Generator().manual_seed(seed))


def test_logits_equal_transformers(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    with torch.no_grad():
        torch.testing.assert_close(ours(_ids()), theirs(input_ids=_ids()).logits, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("modifier", ["attn_softcap", "attn_scale_dim", "final_softcap", "embed_scale", "norm_offset"])
def test_each_modifier_changes_the_logits(modifier: str, pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    attentions = [layer.mixer for layer in ours.layers]
    norms = [m for m in ours.modules() if hasattr(m, "offset")]
    saved = ([(a.softcap, a.scale) for a in attentions], ours.logit_softcap, ours.embed.scale)
    try:
        for attention in attentions:
            attention.softcap = 0.0 if modifier == "attn_softcap" else attention.softcap
            attention.scale = None if modifier == "attn_scale_dim" else attention.scale
        ours.logit_softcap = 0.0 if modifier == "final_softcap" else ours.logit_softcap
        ours.embed.scale = 0.0 if modifier == "embed_scale" else ours.embed.scale
        for norm in norms:
            norm.offset = modifier != "norm_offset"
        with torch.no_grad():
            assert not torch.allclose(ours(_ids(2)), theirs(input_ids=_ids(2)).logits, atol=1e-3)
    finally:
        for attention, (cap, scale) in zip(attentions, saved[0]):
            attention.softcap, attention.scale = cap, scale
        ours.logit_softcap, ours.embed.scale = saved[1], saved[2]
        for norm in norms:
            norm.offset = True


def test_soft_capped_attention_trains(pair: tuple[Any, Any]) -> None:
    """The eager path soft-capped scores take has finite gradients everywhere (sliding band and full square)."""
    ours, _ = pair
    ours.zero_grad()
    ours(_ids(3)).logsumexp(-1).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in ours.parameters())
    ours.zero_grad()


def test_gemma_3_logits_equal_transformers() -> None:
    """The published Gemma-3-4B-it text_config at small dims, one rotary base on both kinds (hpdsl has one)."""
    config = {**published("gemma_3_4b_it")["text_config"], "hidden_size": 64, "intermediate_size": 96,
              "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
              "vocab_size": 101, "max_position_embeddings": 64, "query_pre_attn_scalar": 24, "sliding_window": 5,
              "rms_norm_eps": 1e-6, "rope_scaling": None,
              "rope_parameters": {kind: {"rope_type": "default", "rope_theta": 10000.0}
                                  for kind in ("sliding_attention", "full_attention")}}
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "rope_theta", "rope_local_base_freq"):
        config.pop(key, None)
    imported = import_hf_config(config, profiles=compile_sources([]).profiles, name="scaled")
    assert "attn_scale_dim 24" in imported.text and "embed_scale" in imported.text
    registry = compile_sources([Source("scaled.hpf", imported.text)])
    ours = materialize(build_model(registry.models["scaled"], registry=registry, device="meta"), "cpu", seed=0)
    torch.manual_seed(0)
    hf_config = transformers.AutoConfig.for_model(**config)
    hf_config._attn_implementation = "eager"
    theirs = transformers.AutoModelForCausalLM.from_config(hf_config).float().eval()
    _load(ours, theirs, registry, "gemma3", config["model_type"])
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    with torch.no_grad():
        torch.testing.assert_close(ours.eval()(_ids()), theirs(input_ids=_ids()).logits, atol=1e-4, rtol=1e-4)
