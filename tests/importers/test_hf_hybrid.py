"""Megatron-style hybrid configs (Nemotron-H): the pattern string and the keys read as NemotronHConfig reads them."""

from __future__ import annotations

from typing import Any

import pytest

from hpdsl.api import check_sources
from hpdsl.cost import bind, parameters
from hpdsl.diagnostics import Source
from hpdsl.importers.hf import HfImportError, import_hf_config
from tests.importers.hf_configs import shrunk

SMALL: dict[str, Any] = {
    "model_type": "nemotron_h", "hidden_size": 64, "hybrid_override_pattern": "MM--*-M", "num_hidden_layers": 7,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128,
    "intermediate_size": 96, "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 8,
    "conv_kernel": 4, "chunk_size": 8, "rms_norm_eps": 1e-5,
}


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
    transformers = pytest.importorskip("transformers")
    import torch

    # use_bias is the Mamba projections' bias; attention_bias builds nothing; d_inner is heads × head dim
    # (expand unread); the MLP's activation is mlp_hidden_act.
    config = {**SMALL, "use_bias": True, "attention_bias": True, "mlp_bias": True, "expand": 7,
              "hidden_act": "silu", "mlp_hidden_act": "relu2", "use_conv_bias": False}
    registry = _registry(config, profiles)
    model = registry.models["nh"]
    assert (model.ssm_proj_bias, model.qkv_bias, model.mlp_bias, model.ssm_expand) == (True, False, True, 2)
    assert model.activation == "relu2"
    ours = parameters(bind(model, registry.profile("nemotron_h"), families=registry.families)).total
    hf_config = transformers.NemotronHConfig(**{k: v for k, v in config.items() if k != "model_type"})
    with torch.device("meta"):
        theirs = sum(p.numel() for p in transformers.NemotronHForCausalLM(hf_config).parameters())
    assert ours == theirs


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"hybrid_override_pattern": "M-E*"}, "layer_types", "moe"),
    ({"hybrid_override_pattern": "M-X*"}, "hybrid_override_pattern", "'X'"),
    ({"attention_head_dim": 64}, "attention_head_dim", "head_dim is 16"),
    ({"mamba_num_heads": 5}, "mamba_head_dim", "80"),
    ({"mamba_hidden_act": "gelu"}, "mamba_hidden_act", "silu"),
    ({"hybrid_override_pattern": None}, "hybrid_override_pattern", "no hybrid_override_pattern"),
    ({"num_nextn_predict_layers": 1, "mtp_hybrid_override_pattern": "*E"}, "num_nextn_predict_layers", "multi-token"),
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
