"""The HuggingFace importer: profile choice, facts, stacks, and errors that name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpdsl.api import check_sources
from hpdsl.diagnostics import Source
from hpdsl.fmt import format_source
from hpdsl.importers.hf import HfImportError, import_hf_config, import_hf_file
from hpdsl.ir.stack import compress_kinds
from tests.importers.hf_configs import shrunk

LLAMA = shrunk("llama_3_2_1b_instruct", drop=("attention_bias",), hidden_size=64, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=100, intermediate_size=128,
               tie_word_embeddings=False)
"""Llama-3.2-1B-Instruct's published config.json (tests/data/hf/) made small; attention_bias dropped so a
profile's own fact shows where a test swaps the model_type."""


@pytest.fixture(scope="module")
def profiles():
    result = check_sources([], stdlib=True)
    assert result.registry is not None
    return result.registry.profiles


def _compiles(text: str, name: str):
    result = check_sources([Source(f"{name}.hpf", text)], stdlib=True)
    assert result.registry is not None, [d.message for d in result.diagnostics]
    return result.registry.models[name]


def test_profile_comes_from_model_type_and_output_is_canonical(profiles) -> None:
    imported = import_hf_config(LLAMA, profiles=profiles, name="tiny_llama")
    assert imported.profile == "llama2" and not imported.warnings
    assert format_source(Source("x.hpf", imported.text)) == imported.text
    model = _compiles(imported.text, "tiny_llama")
    assert (model.hidden, model.kv_heads, model.qkv_bias, model.tie_embeddings) == (64, 2, False, False)


def test_unknown_model_type_is_an_error_listing_the_profiles(profiles) -> None:
    with pytest.raises(HfImportError, match="acme_lm") as error:
        import_hf_config({**LLAMA, "model_type": "acme_lm"}, profiles=profiles, name="acme")
    assert error.value.field == "model_type" and "llama2 (llama" in str(error.value)
    imported = import_hf_config({**LLAMA, "model_type": "acme_lm"}, profiles=profiles, name="acme",
                                profile="llama2")
    assert imported.profile == "llama2"


def test_profile_facts_fill_what_the_config_does_not_state(profiles) -> None:
    qwen2 = {**LLAMA, "model_type": "qwen2"}
    model = _compiles(import_hf_config(qwen2, profiles=profiles, name="q2").text, "q2")
    assert (model.qkv_bias, model.o_bias) == (True, False)
    stated = {**qwen2, "attention_bias": False}
    model = _compiles(import_hf_config(stated, profiles=profiles, name="q2b").text, "q2b")
    assert model.qkv_bias is False


def test_composite_configs_read_text_config(profiles) -> None:
    composite = {"model_type": "llava", "text_config": LLAMA, "vision_config": {"hidden_size": 8},
                 "tie_word_embeddings": False}
    imported = import_hf_config(composite, profiles=profiles, name="vl")
    assert imported.profile == "llama2"
    assert "vision_config" in imported.warnings[0]  # said, not dropped silently


def test_hybrid_layer_types_become_a_compact_stack(profiles) -> None:
    config = {**LLAMA, "model_type": "qwen3_next", "num_hidden_layers": 8,
              "layer_types": ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3
              + ["full_attention"], "linear_num_key_heads": 2, "linear_key_head_dim": 16,
              "linear_num_value_heads": 4, "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4}
    imported = import_hf_config(config, profiles=profiles, name="hybrid")
    assert "stack [linear_attention * 3, full_attention] * 2" in imported.text
    model = _compiles(imported.text, "hybrid")
    assert [(g.kind, g.count) for g in model.groups][:2] == [("linear_attention", 3), ("full_attention", 1)]


# Hand-written: no published jamba config.json is in the index yet (tests/importers/hf_configs.py JAMBA_V0_1).
JAMBA_SMALL = {"model_type": "jamba", "hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4,
               "num_key_value_heads": 2, "vocab_size": 100, "intermediate_size": 96, "num_experts": 4,
               "attn_layer_period": 3, "attn_layer_offset": 2, "expert_layer_period": 2, "expert_layer_offset": 0,
               "mamba_dt_rank": "auto"}


def test_period_and_offset_rules_become_runs_of_mixer_ffn_kinds(profiles) -> None:
    """JambaConfig: layer i attends when i % 3 == 2 and routes when i % 2 == 0; ssm dims from its defaults."""
    imported = import_hf_config(JAMBA_SMALL, profiles=profiles, name="hybrid")
    assert "stack [mamba_moe, mamba_dense, attention_moe, mamba_dense, mamba_moe, attention_dense]" in imported.text
    assert "ssm_dt_rank 4" in imported.text  # "auto": ⌈64 / 16⌉
    model = _compiles(imported.text, "hybrid")
    assert (model.ssm_state, model.ssm_conv, model.ssm_expand, model.ssm_conv_bias) == (16, 4, 2, True)


def test_an_offset_past_its_period_is_an_error_naming_it(profiles) -> None:
    with pytest.raises(HfImportError) as error:
        import_hf_config({**JAMBA_SMALL, "expert_layer_offset": 2}, profiles=profiles, name="bad")
    assert error.value.field == "expert_layer_offset"


def test_ssm_keys_under_a_profile_without_ssm_kinds_are_refused(profiles) -> None:
    with pytest.raises(HfImportError) as error:
        import_hf_config({**LLAMA, "mamba_d_state": 16}, profiles=profiles, name="bad")
    assert error.value.field == "mamba_d_state"


def test_a_partial_linear_block_is_an_error_naming_the_field(profiles) -> None:
    config = {**LLAMA, "model_type": "qwen3_next", "linear_num_key_heads": 2}
    with pytest.raises(HfImportError) as error:
        import_hf_config(config, profiles=profiles, name="bad")
    assert error.value.field == "linear_key_head_dim"


def test_dense_layers_in_a_single_kind_profile_are_an_error(profiles) -> None:
    config = {**LLAMA, "model_type": "qwen2_moe", "num_experts": 4, "num_experts_per_tok": 2,
              "moe_intermediate_size": 32, "mlp_only_layers": [0]}
    with pytest.raises(HfImportError, match="mlp_only_layers"):
        import_hf_config(config, profiles=profiles, name="bad")


def test_t5_counts_both_towers(profiles) -> None:
    # Hand-written: the index holds no published t5 config.json, only save_pretrained re-writes.
    config = {"model_type": "t5", "d_model": 64, "num_layers": 2, "num_decoder_layers": 2,
              "num_heads": 4, "d_kv": 16, "d_ff": 128, "vocab_size": 100,
              "feed_forward_proj": "relu", "tie_word_embeddings": True,
              "relative_attention_num_buckets": 32}
    model = _compiles(import_hf_config(config, profiles=profiles, name="t5x").text, "t5x")
    assert [(g.kind, g.count) for g in model.groups] == [("encoder", 2), ("decoder", 2)]


def test_bad_json_is_an_import_error(tmp_path: Path, profiles) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(HfImportError, match="not valid JSON"):
        import_hf_file(path, profiles=profiles)
    path.write_text(json.dumps(LLAMA))
    assert import_hf_file(path, profiles=profiles).model.name.value == tmp_path.name.replace("-", "_")


def test_compress_kinds_finds_the_shortest_period() -> None:
    stack = compress_kinds(["a", "a", "b"] * 4)
    assert [(i.kind.value, i.repeat.value if i.repeat else 1) for i in stack.items] == [("a", 2), ("b", 1)]
    assert stack.repeat is not None and stack.repeat.value == 4
