"""Megatron-style hybrid configs (Nemotron-H): the pattern string and the keys read as NemotronHConfig reads them."""

from __future__ import annotations

from typing import Any

import pytest

from hpdsl.api import check_sources
from hpdsl.cost import bind, parameters
from hpdsl.cost.formulas.comm import layer_comm_coeffs
from hpdsl.diagnostics import Source
from hpdsl.importers.hf import HfImportError, import_hf_config
from tests.importers.hf_configs import shrunk

DIMS: dict[str, Any] = {
    "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128,
    "intermediate_size": 96, "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 8,
    "conv_kernel": 4, "chunk_size": 8, "n_routed_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 24, "moe_shared_expert_intermediate_size": 40,
}
"""The small dims every config here takes; its other keys stay the published Nemotron 3 file's."""

SMALL: dict[str, Any] = shrunk("nemotron_3_nano_30b_a3b", **DIMS, hybrid_override_pattern="MM--*-M",
                               num_hidden_layers=7)
"""Nemotron 3 Nano's published config.json (tests/data/hf/SOURCES.md) at DIMS, seven layers of M, -, *."""


@pytest.fixture(scope="module")
def profiles():
    result = check_sources([], stdlib=True)
    assert result.registry is not None
    return result.registry.profiles


def _registry(config: dict[str, Any], profiles):
    imported = import_hf_config(config, profiles=profiles, name="nh")
    result = check_sources([Source("nh.hpf", imported.text)], stdlib=True)
    assert result.registry is not None, [d.message for d in result.diagnostics]
    return result.registry


def test_the_pattern_lowers_to_runs_of_the_kinds_transformers_names(profiles) -> None:
    imported = import_hf_config({**SMALL, "num_hidden_layers": 3}, profiles=profiles, name="nh")
    # NemotronHConfig takes the layer count from the pattern, whatever num_hidden_layers says.
    assert "layers 7" in imported.text
    assert "stack [linear_attention * 2, mlp * 2, full_attention, mlp, linear_attention]" in imported.text


def test_biases_and_widths_are_read_as_nemotron_h_reads_them(profiles) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # use_bias is the Mamba projections' bias; attention_bias builds nothing; d_inner is heads × head dim
    # (ssm_head_dim; expand is read into ssm_expand, which the mixer then does not read); the MLP's
    # activation is mlp_hidden_act.
    config = {**SMALL, "use_bias": True, "attention_bias": True, "mlp_bias": True, "expand": 7,
              "hidden_act": "silu", "mlp_hidden_act": "relu2", "use_conv_bias": False}
    registry = _registry(config, profiles)
    model = registry.models["nh"]
    assert (model.ssm_proj_bias, model.qkv_bias, model.mlp_bias) == (True, False, True)
    assert (model.ssm_heads, model.ssm_head_dim, model.ssm_expand) == (8, 16, 7)
    assert model.activation == "relu2"
    ours = parameters(bind(model, registry.profile("nemotron_h"), families=registry.families)).total
    assert ours == _hf_count(config)


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"hybrid_override_pattern": "M-X*"}, "hybrid_override_pattern", "'X'"),
    ({"attention_head_dim": 64}, "attention_head_dim", "head_dim is 16"),
    ({"layers_block_type": ["mamba", "moe", "mamba2"]}, "layers_block_type", "'mamba2'"),
    ({"mamba_hidden_act": "gelu"}, "mamba_hidden_act", "silu"),
    ({"hybrid_override_pattern": None}, "hybrid_override_pattern", "no hybrid_override_pattern"),
])
def test_what_hpdsl_cannot_build_is_refused_naming_the_key(profiles, change, field, words) -> None:
    config = {k: v for k, v in {**SMALL, **change}.items() if v is not None}
    with pytest.raises(HfImportError) as error:
        _registry(config, profiles)
    assert error.value.field == field and words in str(error.value)


def test_a_hybrid_key_in_another_models_config_is_refused(profiles) -> None:
    llama = shrunk("llama_3_2_1b_instruct", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, vocab_size=100, intermediate_size=128,
                   hybrid_override_pattern="M-")
    with pytest.raises(HfImportError) as error:
        import_hf_config(llama, profiles=profiles)
    assert error.value.field == "hybrid_override_pattern"


def _hf_count(config: dict[str, Any]) -> int:
    import torch
    import transformers

    hf_config = transformers.NemotronHConfig(**{k: v for k, v in config.items() if k != "model_type"})
    with torch.device("meta"):
        return sum(p.numel() for p in transformers.NemotronHForCausalLM(hf_config).parameters())


def test_a_mamba_width_no_multiple_of_hidden_is_exact(profiles) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # Nemotron-3 Nano's mixer is 64 × 64 = 4,096 wide beside hidden 2,688; here 5 × 16 = 80 beside 64.
    config = {**SMALL, "mamba_num_heads": 5, "n_groups": 1}
    registry = _registry(config, profiles)
    model = registry.models["nh"]
    assert (model.ssm_heads, model.ssm_head_dim) == (5, 16)
    assert parameters(bind(model, registry.profile("nemotron_h"), families=registry.families)).total == \
        _hf_count(config)


def test_moe_layers_price_nemotron_h_moe_exactly(profiles) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # Pattern E: NemotronHMoE, non-gated relu² experts, a sigmoid router and one shared expert as wide as
    # moe_shared_expert_intermediate_size, whatever n_shared_experts says.
    config = {**SMALL, "hybrid_override_pattern": "ME*E-M", "n_shared_experts": 3}
    registry = _registry(config, profiles)
    model = registry.models["nh"]
    assert (model.experts, model.top_k, model.expert_width, model.shared_experts, model.shared_width) == \
        (8, 2, 24, 1, 40)
    assert not model.shared_gate and model.router_sigmoid and model.router_correction
    params = parameters(bind(model, registry.profile("nemotron_h"), families=registry.families))
    assert params.total == _hf_count(config)


def test_latent_moe_layers_price_nemotron_3_supers_moe_exactly(profiles) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # Nemotron 3 Super: moe_latent_size puts fc1_latent_proj (hidden → latent) before the routed experts and
    # fc2_latent_proj after, the experts latent wide; the router and the shared expert read hidden. The MTP
    # layer it states is not built by transformers: ignored, not priced. (mlp_bias true: see
    # test_nemotron_3s_experts_have_no_bias_whatever_mlp_bias_says.)
    # Nemotron 3 Super's published file at DIMS (its own num_nextn_predict_layers 1 and
    # mtp_hybrid_override_pattern "*E"), its latent 16 wide.
    config = shrunk("nemotron_3_super_120b_a12b_nvfp4", **DIMS, hybrid_override_pattern="ME*E-M",
                    num_hidden_layers=6, moe_latent_size=16)
    registry = _registry(config, profiles)
    model = registry.models["nh"]
    assert model.latent_width == 16 and not model.mtp
    params = parameters(bind(model, registry.profile("nemotron_h"), families=registry.families))
    assert params.total == _hf_count(config)
    no_latent = {k: v for k, v in config.items() if k != "moe_latent_size"}
    # Per E layer: the two projections (2 · 64 · 16) beside experts 16 wide, not 64 (8 · 2 · 24 · 48 fewer).
    assert params.total == _hf_count(no_latent) + 2 * (2 * 64 * 16 - 8 * 2 * 24 * 48)
    # Expert parallelism moves each token's top_k latent vectors (16 wide), there and back.
    cost = bind(model, registry.profile("nemotron_h"), families=registry.families)
    assert layer_comm_coeffs(cost.kind_config("moe")).ep == 2 * 2 * 16


def test_nemotron_3s_experts_have_no_bias_whatever_mlp_bias_says(profiles) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # NemotronHExperts hold up_proj and down_proj only; mlp_bias biases the MLPs, the shared expert and the latent
    # projections (NemotronHMoE). The profile states expert_bias false (profiles/nemotron_h.hpf), so
    # families/grouped_experts.hpf gives the experts no bias. Nemotron 3 Super's published file at DIMS, its latent
    # 16 wide, with the one key changed: mlp_bias true (the file states false).
    config = shrunk("nemotron_3_super_120b_a12b_nvfp4", **DIMS, hybrid_override_pattern="ME*E-M",
                    num_hidden_layers=6, moe_latent_size=16, mlp_bias=True)
    registry = _registry(config, profiles)
    model = registry.models["nh"]
    assert model.mlp_bias and not model.expert_bias
    params = parameters(bind(model, registry.profile("nemotron_h"), families=registry.families))
    assert params.total == _hf_count(config)
    # Beside the unbiased file: per MLP layer up (96) and down (64) biases; per E layer the shared expert's
    # (40 + 64) and the latent projections' (16 + 64); none for the 8 experts' (8 · (24 + 16)).
    unbiased = _hf_count({**config, "mlp_bias": False})
    assert params.total == unbiased + (96 + 64) + 2 * (40 + 64 + 16 + 64)


def test_layers_block_type_in_the_legacy_names_lowers_as_transformers_remaps_it(profiles) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # Nemotron 3 Ultra's file names its layers mamba/attention/moe; NemotronHConfig remaps mamba →
    # linear_attention and attention → full_attention (configuration_utils' remap_legacy_layer_types).
    listed = ["mamba", "moe", "attention", "mlp", "linear_attention", "full_attention"]
    # Nemotron 3 Ultra's published file at DIMS, which states no hybrid_override_pattern.
    config = shrunk("nemotron_3_ultra_550b_a55b_bf16", **DIMS, layers_block_type=listed, moe_latent_size=16)
    assert "hybrid_override_pattern" not in config
    imported = import_hf_config(config, profiles=profiles, name="nh")
    assert "stack [linear_attention, moe, full_attention, mlp, linear_attention, full_attention]" in imported.text
    registry = _registry(config, profiles)
    model = registry.models["nh"]
    assert parameters(bind(model, registry.profile("nemotron_h"), families=registry.families)).total == \
        _hf_count(config)
