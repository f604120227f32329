"""Nemotron-H, a Megatron-style hybrid: layers of a mixer only or an MLP only, against transformers.

A scaled config of the published layout ("M-M*-M": Mamba-2, MLP, attention
layers, one block each) is imported through `import-hf`'s importer, built, and
held to transformers' NemotronHForCausalLM: the same parameters, a Mamba-2
mixer that computes what NemotronHMamba2Mixer computes, the matmul FLOPs the
estimator prices, and a forward and backward pass on CPU. Nemotron 3 Nano's published file, made
small, adds MoE layers (pattern E) and a Mamba-2 width no multiple of hidden.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from hpdsl.api import compile_paths, compile_sources  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.cost.formulas.flops import MATMUL_TERMS, forward_flops_by_term  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.modules import Mamba2  # noqa: E402
from tests.importers.hf_configs import shrunk  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BATCH, SEQ = 2, 16
HF_SMALL = dict(model_type="nemotron_h", hidden_size=64, hybrid_override_pattern="M-M*-M", num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, vocab_size=128, intermediate_size=96, mamba_num_heads=8,
                mamba_head_dim=16, n_groups=2, ssm_state_size=8, conv_kernel=4, chunk_size=8,
                mlp_hidden_act="relu2", tie_word_embeddings=False, rms_norm_eps=1e-5)


@pytest.fixture(scope="module")
def registry() -> Registry:
    stdlib = compile_paths([ROOT / "profiles", ROOT / "families"])
    imported = import_hf_config(HF_SMALL, profiles=stdlib.profiles, name="nemotron_h_small")
    return compile_sources([Source("nemotron_h_small.hpf", imported.text)])


@pytest.fixture(scope="module")
def hf_model():
    torch.manual_seed(0)
    config = transformers.NemotronHConfig(**{k: v for k, v in HF_SMALL.items() if k != "model_type"},
                                          attn_implementation="eager")
    return transformers.NemotronHForCausalLM(config).eval()


def _built(registry: Registry) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(registry.models["nemotron_h_small"], registry=registry, device="cpu",
                       selectors={"attention": {"backend": "eager"}})


def _cost(registry: Registry):
    return bind(registry.models["nemotron_h_small"], registry.profile("nemotron_h"), families=registry.families)


def test_the_pattern_becomes_one_block_layers(registry: Registry) -> None:
    assert list(_cost(registry).layer_kinds()) == ["linear_attention", "mlp", "linear_attention", "full_attention",
                                                   "mlp", "linear_attention"]
    layers = _built(registry).layers
    assert layers[1].mixer is None and layers[1].ffn is not None  # an MLP-only layer
    assert layers[0].ffn is None and layers[0].mixer is not None  # a Mamba-2-only layer
    assert layers[3].ffn is None and layers[3].mixer is not None  # an attention-only layer


def test_a_scaled_nemotron_h_has_transformers_parameters_and_trains(registry: Registry, hf_model) -> None:
    built = _built(registry)
    count = sum(p.numel() for p in built.parameters())
    assert count == sum(p.numel() for p in hf_model.parameters()) == parameters(_cost(registry)).total
    built(torch.randint(0, 128, (BATCH, SEQ))).float().square().mean().backward()
    assert all(p.grad is not None for p in built.parameters())


def test_the_mamba2_mixer_computes_what_transformers_computes(registry: Registry, hf_model) -> None:
    ours = Mamba2(_cost(registry).kind_config("linear_attention"))
    theirs = hf_model.model.layers[0].mixer if hasattr(hf_model, "model") else hf_model.backbone.layers[0].mixer
    ours.load_state_dict(theirs.state_dict())
    assert ours.norm.eps == theirs.norm.variance_epsilon  # the config's norm_eps, imported
    x = torch.randn(BATCH, SEQ, 64)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)


def _measured(model: torch.nn.Module) -> int:
    ids = torch.randint(0, 128, (BATCH, SEQ))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(ids)
    return int(counter.get_total_flops())


def test_matmul_flops_are_the_estimate_for_ours_and_transformers(registry: Registry, hf_model) -> None:
    cost = _cost(registry)
    terms = forward_flops_by_term(cost, batch=BATCH, seq_len=SEQ)
    estimate = sum(terms[c].get(t, 0.0) for c in [*cost.layer_kinds(), "output"] for t in MATMUL_TERMS)
    assert _measured(_built(registry)) == estimate == 9_035_776
    # As for Bamba (tests/torch/test_mamba.py, docs/validation.md): transformers' reference scan carries
    # the chunk states with one (c+1)×(c+1) matmul per head, and its conv1d computes K − 1 dropped outputs.
    layers, heads, head_dim, state, chunks, conv_dim, kernel = 3, 8, 16, 8, SEQ // 8, 128 + 2 * 2 * 8, 4
    carried = layers * BATCH * 2 * (chunks + 1) ** 2 * heads * head_dim * state
    padding = layers * BATCH * (kernel - 1) * conv_dim * 2 * kernel
    assert _measured(hf_model) == estimate + carried + padding == 9_169_408


# NVIDIA-Nemotron-3-Nano-30B-A3B's published file made small: its pattern's first layers (Mamba-2, MoE, attention),
# 8 of its 128 experts, a 6 × 16 = 96-wide mixer beside hidden 64 (the file's: 64 × 64 = 4,096 beside 2,688).
NANO_SMALL = shrunk("nemotron_3_nano_30b_a3b", hidden_size=64, hybrid_override_pattern="MEM*EME",
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=128, mamba_num_heads=6,
                    mamba_head_dim=16, n_groups=2, ssm_state_size=8, chunk_size=8, n_routed_experts=8,
                    num_experts_per_tok=2, moe_intermediate_size=32, moe_shared_expert_intermediate_size=48)


def _imported(config: dict[str, Any], name: str) -> tuple[Registry, Any]:
    """Return the registry of `config` imported as model `name` (standard library), and that model."""
    stdlib = compile_paths([ROOT / "profiles", ROOT / "families"])
    imported = import_hf_config(config, profiles=stdlib.profiles, name=name)
    registry = compile_sources([Source(f"{name}.hpf", imported.text)])
    return registry, registry.models[name]


def _transformers_meta(config: dict[str, Any]) -> Any:
    """Return transformers' NemotronHForCausalLM of `config` on the meta device (its parameters' count)."""
    hf_config = transformers.NemotronHConfig(**{k: v for k, v in config.items() if k != "model_type"})
    with torch.device("meta"):
        return transformers.NemotronHForCausalLM(hf_config)


def test_a_scaled_nemotron_3_nano_has_transformers_parameters_and_trains() -> None:
    registry, model = _imported(NANO_SMALL, "nano_small")
    cost = bind(model, registry.profile("nemotron_h"), families=registry.families)
    assert list(cost.layer_kinds()) == ["linear_attention", "moe", "linear_attention", "full_attention", "moe",
                                        "linear_attention", "moe"]
    torch.manual_seed(0)
    built = build_model(model, registry=registry, device="cpu", selectors={"attention": {"backend": "eager"}})
    theirs = _transformers_meta(NANO_SMALL)
    assert sum(p.numel() for p in built.parameters()) == sum(p.numel() for p in theirs.parameters()) \
        == parameters(cost).total
    assert built.layers[1].mixer is None and built.layers[1].ffn.experts.up_proj.shape == (8, 64, 32)
    assert built.layers[0].mixer.in_proj.weight.shape == (2 * 96 + 2 * 2 * 8 + 6, 64)
    built(torch.randint(0, 128, (BATCH, SEQ))).float().square().mean().backward()
    assert all(p.grad is not None for p in built.parameters())


def test_a_scaled_nemotron_3_nanos_matmul_flops_are_the_estimate() -> None:
    # The MoE layers' router and top-k experts (each token through 2 of 8), the mixer-only layers no router.
    registry, model = _imported(NANO_SMALL, "nano_small")
    cost = bind(model, registry.profile("nemotron_h"), families=registry.families)
    terms = forward_flops_by_term(cost, batch=BATCH, seq_len=SEQ)
    assert terms["linear_attention"].get("router", 0.0) == terms["full_attention"].get("router", 0.0) == 0.0
    estimate = sum(terms[c].get(t, 0.0) for c in [*cost.layer_kinds(), "output"] for t in MATMUL_TERMS)
    torch.manual_seed(0)
    built = build_model(model, registry=registry, device="cpu", selectors={"attention": {"backend": "eager"}})
    assert _measured(built) == estimate == 8_912_896


# NVIDIA-Nemotron-3-Super-120B-A12B's published file made small as Nano's above, its routed experts behind a 24-wide
# latent (the file's moe_latent_size 1,024 beside hidden 4,096); its MTP layer is not built (transformers builds none).
SUPER_SMALL = shrunk("nemotron_3_super_120b_a12b_nvfp4", hidden_size=64, hybrid_override_pattern="MEM*EME",
                     num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=128, mamba_num_heads=6,
                     mamba_head_dim=16, n_groups=2, ssm_state_size=8, chunk_size=8, n_routed_experts=8,
                     num_experts_per_tok=2, moe_intermediate_size=32, moe_shared_expert_intermediate_size=48,
                     moe_latent_size=24)




def test_a_scaled_nemotron_3_super_has_transformers_parameters_and_trains() -> None:
    registry, model = _imported(SUPER_SMALL, "super_small")
    cost = bind(model, registry.profile("nemotron_h"), families=registry.families)
    torch.manual_seed(0)
    built = build_model(model, registry=registry, device="cpu", selectors={"attention": {"backend": "eager"}})
    theirs = _transformers_meta(SUPER_SMALL)
    assert sum(p.numel() for p in built.parameters()) == sum(p.numel() for p in theirs.parameters()) \
        == parameters(cost).total
    # The routed experts are latent wide (transformers' [experts, out, in] transposed); the shared one hidden wide.
    moe = built.layers[1].ffn
    assert moe.experts.up_proj.shape == (8, 24, 32) and moe.experts.down_proj.shape == (8, 32, 24)
    assert moe.latent_proj.fc1_latent_proj.weight.shape == (24, 64)
    assert moe.latent_proj.fc2_latent_proj.weight.shape == (64, 24)
    assert moe.shared_experts[0].up_proj.weight.shape == (48, 64)
    built(torch.randint(0, 128, (BATCH, SEQ))).float().square().mean().backward()
    assert all(p.grad is not None for p in built.parameters())


def test_a_scaled_nemotron_3_supers_matmul_flops_are_the_estimate() -> None:
    # The latent projections' matmuls (families/router.hpf's layout) and the top-k experts at the latent width.
    registry, model = _imported(SUPER_SMALL, "super_small")
    cost = bind(model, registry.profile("nemotron_h"), families=registry.families)
    terms = forward_flops_by_term(cost, batch=BATCH, seq_len=SEQ)
    estimate = sum(terms[c].get(t, 0.0) for c in [*cost.layer_kinds(), "output"] for t in MATMUL_TERMS)
    torch.manual_seed(0)
    built = build_model(model, registry=registry, device="cpu", selectors={"attention": {"backend": "eager"}})
    # Nano's 8,912,896 with, in each of the 3 MoE layers and per token, 2 · 64 · 24 multiply-adds of the
    # projections beside 2 experts' 2 · 32 · 24, not 2 · 32 · 64: 2 FLOPs each, BATCH · SEQ tokens.
    per_token = 3 * 2 * (2 * 64 * 24 + 2 * 2 * 32 * 24 - 2 * 2 * 32 * 64)
    assert _measured(built) == estimate == 8_912_896 + per_token * BATCH * SEQ
