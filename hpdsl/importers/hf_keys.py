"""The importer's tables: what transformers assumes for an absent key, and the keys irrelevant to cost.

Every key of a config.json is either read (a FIELDS row's `hf` keys,
hpdsl/model/fields.py, or one of READ below), irrelevant to cost and structure
(IGNORED, IGNORED_SUFFIXES, or IGNORED_AT at its harmless value), or an error
naming it. DEFAULTS holds, per model_type, what transformers' config class uses
when a config leaves a key out; tests/importers/test_hf_defaults.py holds every
row to the config class of the installed transformers (the importer itself
never imports transformers). docs/language.md, "Importing HuggingFace configs",
lists these tables.
"""

from __future__ import annotations

from typing import Any

READ: frozenset[str] = frozenset({
    "model_type", "text_config", "layer_types", "full_attention_interval", "decoder_sparse_step",
    "mlp_only_layers", "hidden_act", "hidden_activation", "activation_function", "feed_forward_proj",
    "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "attention_bias", "qkv_bias",
    "use_bias", "num_decoder_layers", "use_sliding_window", "max_window_layers", "moe_layer_freq",
    "qk_head_dim", "sliding_window_pattern", "_sliding_window_pattern",
    "attn_layer_period", "attn_layer_offset", "expert_layer_period", "expert_layer_offset",
    "attn_layer_indices", "mamba_d_head",
    # Nemotron-H's (hpdsl/importers/hf_hybrid.py rewrites them)
    "hybrid_override_pattern", "layers_block_type", "mlp_hidden_act", "mamba_head_dim", "attention_head_dim",
    "mamba_hidden_act", "mtp_hybrid_override_pattern", "mtp_layers_block_type",
})
"""Keys the importer reads beside the FIELDS rows' `hf` keys."""

IGNORED: dict[str, str] = {key: why for why, keys in {
    "metadata": ("architectures", "_name_or_path", "transformers_version", "torch_dtype", "dtype",
                 "auto_map", "id2label", "label2id", "problem_type", "task_specific_params", "_commit_hash",
                 "finetuning_task", "prefix", "tokenizer_class", "model_name", "n_ctx"),
    "token ids": ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "sep_token_id"),
    "initialisation": ("initializer_range", "initializer_factor", "init_std", "initializer_std"),
    "inference and output flags": ("use_cache", "output_attentions", "output_hidden_states", "return_dict",
                                   "output_router_logits", "torchscript", "chunk_size_feed_forward",
                                   "use_return_dict", "pruned_heads",
                                   "num_logits_to_keep", "gradient_checkpointing", "output_past",
                                   "cache_implementation", "use_mamba_kernels", "use_mambapy",
                                   "use_associative_scan", "mamba_ssm_cache_dtype"),
    "positions (no parameters, elementwise cost)": ("rope_theta", "rope_scaling", "rope_parameters",
                                                    "partial_rotary_factor", "original_max_position_embeddings",
                                                    "rope_local_base_freq", "relative_attention_max_distance",
                                                    "mrope_section", "mrope_interleaved", "initial_context_length",
                                                    "rope_interleave"),
    "derived by the config class from a key the importer reads": ("dense_act_fn", "is_gated_act",
                                                                  "scale_decoder_outputs"),
    "storage format (same parameter count)": ("quantization_config",),
    "numerics (same shapes, elementwise cost)": ("clip_qkv", "swiglu_alpha", "swiglu_limit",
                                                 "attn_logit_softcapping", "final_logit_softcapping",
                                                 "query_pre_attn_scalar", "scale_attn_weights",
                                                 "routed_scaling_factor", "norm_topk_prob", "pretraining_tp",
                                                 "layer_norm_type", "time_step_limit", "time_step_min",
                                                 "time_step_max", "time_step_floor", "residual_in_fp32",
                                                 "rescale_prenorm_residual"),
    "training losses (no parameters)": ("z_loss_coefficient",),
    "routing policy (same router parameters)": ("router_aux_loss_coef", "aux_loss_alpha", "topk_method",
                                                "n_group", "topk_group", "scoring_func", "seq_aux", "ep_size",
                                                "router_jitter_noise"),
    "classification and summary heads (not the language model)": (
        "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
        "summary_first_dropout", "num_labels"),
}.items() for key in keys}
"""Keys irrelevant to cost and structure, each with the reason."""

IGNORED_SUFFIXES: tuple[str, ...] = ("_token_id", "_token_ids", "_token_index", "_dropout", "_pdrop",
                                     "dropout_rate")
"""Key endings that are always token ids or dropout rates (no parameters, no matmul FLOPs)."""

IGNORED_AT: dict[str, Any] = {
    "is_encoder_decoder": None,          # the profile's kinds say whether a model has two towers
    "add_cross_attention": False,
    "use_bidirectional_attention": False,
    "reorder_and_upcast_attn": False,
    "scale_attn_by_inverse_layer_idx": False,
    "is_decoder": False,
    "mlp_type": "default",               # StarCoder2's published legacy keys, at what transformers builds
    "norm_type": "layer_norm",
    "tie_encoder_decoder": False,
}
"""Keys irrelevant only at the given value (None: at any value); any other value is an error."""

_LLAMA_LIKE = {"tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False}

DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {**_LLAMA_LIKE, "mlp_bias": False},
    "mistral": {"tie_word_embeddings": False, "hidden_act": "silu", "sliding_window": 4096},
    "mixtral": {"tie_word_embeddings": False, "hidden_act": "silu", "sliding_window": None},
    "qwen2": {"tie_word_embeddings": False, "hidden_act": "silu", "use_sliding_window": False,
              "max_window_layers": 28},
    "qwen2_moe": {"tie_word_embeddings": False, "hidden_act": "silu", "use_sliding_window": False,
                  "decoder_sparse_step": 1, "qkv_bias": True},
    "qwen3": {"tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False, "head_dim": 128,
              "use_sliding_window": False},
    "qwen3_moe": {"tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False,
                  "use_sliding_window": False, "decoder_sparse_step": 1},
    "qwen3_next": {"tie_word_embeddings": False, "hidden_act": "silu", "head_dim": 256},
    "qwen3_5": {"tie_word_embeddings": False},
    "qwen3_5_text": {"tie_word_embeddings": False, "hidden_act": "silu", "head_dim": 256},
    "qwen3_5_moe": {"tie_word_embeddings": False},
    "qwen3_vl": {"tie_word_embeddings": False},
    "qwen3_vl_text": {"hidden_act": "silu", "attention_bias": False, "head_dim": 128},
    "deepseek_v2": {"tie_word_embeddings": False, "hidden_act": "silu", "mlp_bias": False,
                    "first_k_dense_replace": 0, "n_shared_experts": 2},
    "deepseek_v3": {"tie_word_embeddings": False, "hidden_act": "silu", "first_k_dense_replace": 3,
                    "n_shared_experts": 1},
    "t5": {"tie_word_embeddings": True, "feed_forward_proj": "relu", "d_kv": 64,
           "relative_attention_num_buckets": 32, "num_decoder_layers": None},
    "phi3": {"tie_word_embeddings": False, "hidden_act": "silu", "sliding_window": None},
    "starcoder2": {"tie_word_embeddings": True, "hidden_act": "gelu_pytorch_tanh", "use_bias": True,
                   "sliding_window": None},
    "gpt2": {"tie_word_embeddings": True, "activation_function": "gelu_new", "n_inner": None, "n_positions": 1024},
    "olmoe": {"tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False},
    "gemma3_text": {"tie_word_embeddings": True, "hidden_activation": "gelu_pytorch_tanh",
                    "attention_bias": False, "head_dim": 256},
    "gpt_oss": {"tie_word_embeddings": False, "attention_bias": True, "head_dim": 64},
    "bamba": {"tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
              "mamba_n_heads": 128, "mamba_d_head": "auto", "mamba_n_groups": 1, "mamba_d_state": 256,
              "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": True,
              "mamba_proj_bias": False},
    "nemotron_h": {"tie_word_embeddings": False, "head_dim": 128, "mlp_hidden_act": "relu2", "mlp_bias": False,
                   "mamba_num_heads": 128, "mamba_head_dim": 64, "mamba_hidden_act": "silu",
                   "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4, "chunk_size": 128,
                   "use_conv_bias": True, "num_nextn_predict_layers": 0},
    "jamba": {"tie_word_embeddings": False, "hidden_act": "silu", "num_experts": 16, "num_experts_per_tok": 2,
              "expert_layer_period": 2, "expert_layer_offset": 1, "attn_layer_period": 8, "attn_layer_offset": 4,
              "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": "auto",
              "mamba_conv_bias": True, "mamba_proj_bias": False},
}
"""model_type → key → what transformers' config class uses when the key is absent (None: unset)."""

COMPOSITE_KEYS: frozenset[str] = frozenset({"tie_word_embeddings"})
"""Keys a composite (text_config) model reads from its top level: transformers ties the head of the
outer model by the outer config's flag, whatever text_config says."""


def irrelevant(key: str, value: Any) -> bool:
    """Whether a config key is irrelevant to cost and structure at `value`."""
    if key in IGNORED or key.endswith(IGNORED_SUFFIXES):
        return True
    if key in IGNORED_AT:
        harmless = IGNORED_AT[key]
        return harmless is None or value == harmless or value is None
    return False


__all__ = ["COMPOSITE_KEYS", "DEFAULTS", "IGNORED", "IGNORED_AT", "IGNORED_SUFFIXES", "READ", "irrelevant"]
