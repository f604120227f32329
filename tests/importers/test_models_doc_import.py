"""docs/models.md's Qwen3-Next import is the real config's: the published config.json imported, shown verbatim."""

from __future__ import annotations

import re
from pathlib import Path

from hpdsl.api import check_sources
from hpdsl.diagnostics import Source
from hpdsl.importers.hf import import_hf_config

MODELS_DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"

QWEN3_NEXT_80B_A3B = {
    "architectures": ["Qwen3NextForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "decoder_sparse_step": 1,
    "eos_token_id": 151645,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "mlp_only_layers": [],
    "model_type": "qwen3_next",
    "moe_intermediate_size": 512,
    "norm_topk_prob": True,
    "num_attention_heads": 16,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "num_hidden_layers": 48,
    "num_key_value_heads": 2,
    "output_router_logits": False,
    "partial_rotary_factor": 0.25,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 10000000,
    "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
"""Qwen/Qwen3-Next-80B-A3B-Instruct's config.json as published (transformers writes no MTP key for it)."""


def test_the_models_doc_shows_the_published_config_imported() -> None:
    registry = check_sources([], stdlib=True).registry
    assert registry is not None
    imported = import_hf_config(QWEN3_NEXT_80B_A3B, profiles=registry.profiles, name="qwen3_next")
    shown = re.search(r"\$ cat qwen3_next\.hpf\n(.*?)```", MODELS_DOC.read_text(), re.S)
    assert shown is not None
    assert shown.group(1) == imported.text
    assert "ffn_width 5120" in imported.text and "mtp" not in imported.text


def test_the_imported_count_equals_transformers() -> None:
    import pytest

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hpdsl.cost import bind, parameters

    registry = check_sources([], stdlib=True).registry
    assert registry is not None
    imported = import_hf_config(QWEN3_NEXT_80B_A3B, profiles=registry.profiles, name="qwen3_next")
    compiled = check_sources([Source("qwen3_next.hpf", imported.text)], stdlib=True).registry
    assert compiled is not None
    model = compiled.models["qwen3_next"]
    with torch.device("meta"):
        hf = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**QWEN3_NEXT_80B_A3B))
    total = sum(p.numel() for p in hf.parameters())
    assert parameters(bind(model, compiled.profiles[model.profile])).total == total == 79_674_391_296
