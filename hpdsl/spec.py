"""The language's closed sets: flavours, axes, run facts, model fields and blocks.

Checks, lowering, the importer and the docs all read these tables, so a fact
the language knows is stated exactly once.
"""

from __future__ import annotations

from typing import Literal

import attrs

from hpdsl.model.axes import CONDITION_AXES as AXES  # the mesh axes a family condition may name

ATTENTION_FLAVOURS = ("full", "linear")
FFN_FLAVOURS = ("dense", "moe")

FieldType = Literal["int", "float", "bool", "string"]


@attrs.frozen
class FieldSpec:
    """One typed key: its type, its least value (ints), and what it means."""

    type: FieldType
    meaning: str
    minimum: int | None = None


def _int(meaning: str, minimum: int = 1) -> FieldSpec:
    return FieldSpec("int", meaning, minimum)


def _bool(meaning: str) -> FieldSpec:
    return FieldSpec("bool", meaning)


RUN_FACTS: dict[str, FieldSpec] = {
    "grad_bytes": _int("bytes per gradient element", 0),
    "optimizer_state_bytes": _int("bytes per optimizer-state element", 0),
    "optimizer_states": _int("optimizer states per parameter", 0),
    "main_param_bytes": _int("bytes of the fp32 master copy per parameter", 0),
    "norm_bytes": _int("bytes per saved normalisation input element", 0),
    "dropout_bytes": _int("bytes per dropout-mask element", 0),
    "grad_accumulation": _bool("gradients take memory even without pipeline parallelism"),
    "shard_activations": _bool("TP shards the activations between layers and the output layer's"),
    "loss_parallel": _bool("the loss runs on vocab-sharded logits"),
    "reshard_params": _bool("FSDP frees a layer's gathered parameters after it has run"),
    "deferred_grad_accumulation": _bool("FSDP holds each layer's reduce-scatter output until backward ends"),
    "overlapped_grad_reduce": _bool("gradient reduction overlaps the backward pass"),
}
"""The only run facts a profile may state (domain.md §1.5)."""

DEFAULT_RUN: dict[str, int | bool] = {
    "grad_bytes": 4, "optimizer_state_bytes": 4, "optimizer_states": 2, "main_param_bytes": 0,
    "norm_bytes": 4, "dropout_bytes": 0, "grad_accumulation": False, "shard_activations": False,
    "loss_parallel": True, "reshard_params": False, "deferred_grad_accumulation": False,
    "overlapped_grad_reduce": False,
}

PROFILE_MODEL_FACTS: dict[str, FieldSpec] = {
    "v_head_dim": _int("value head dim the family prices MLA attention with"),
}
"""The keys of a profile's `model { }` block (domain.md §1.1)."""

MODEL_FIELDS: dict[str, FieldSpec] = {
    "hidden": _int("hidden size h (HF hidden_size)"),
    "layers": _int("body layers, MTP excluded (HF num_hidden_layers)"),
    "heads": _int("query heads a (HF num_attention_heads)"),
    "kv_heads": _int("key/value heads n_kv (HF num_key_value_heads); default: heads"),
    "head_dim": _int("head dim d_h (HF head_dim); default: hidden / heads"),
    "vocab": _int("vocabulary size v (HF vocab_size)"),
    "ffn_width": _int("dense feed-forward width h_ff (HF intermediate_size)"),
    "max_positions": _int("maximum sequence length (HF max_position_embeddings)"),
    "mtp": _int("multi-token-prediction layers after the body", 0),
    "first_k_dense": _int("dense layers before the MoE layers (HF first_k_dense_replace)", 0),
    "layer_norms": _int("normalisations per layer, when not the kind's normOp count", 0),
    "position_buckets": _int("relative-position buckets, one bias table per tower (T5)"),
    "tie_embeddings": _bool("the output head shares the embedding matrix"),
    "qk_norm": _bool("per-head RMSNorm on queries and keys"),
    "output_gate": _bool("attention output gate (doubles the query projection)"),
    "qkv_bias": _bool("q, k and v projections have biases"),
    "o_bias": _bool("the output projection has a bias"),
    "mlp_bias": _bool("feed-forward projections have biases"),
    "norm_bias": _bool("normalisations have a bias (LayerNorm)"),
}
"""Top-level model fields; a bool field stated alone means true."""

REQUIRED_MODEL_FIELDS = ("hidden", "layers", "heads", "vocab")

MODEL_BLOCKS: dict[str, dict[str, FieldSpec]] = {
    "moe": {
        "experts": _int("routed experts E"),
        "top_k": _int("experts chosen per token k"),
        "width": _int("routed expert width h_e (HF moe_intermediate_size)"),
        "shared": _int("shared experts E_s", 0),
        "shared_width": _int("shared expert width (HF shared_expert_intermediate_size)"),
        "shared_gate": _bool("a sigmoid gate on the shared expert output"),
        "router_bias": _bool("the router projection has a bias"),
    },
    "linear": {
        "key_heads": _int("linear-attention key heads n_k"),
        "key_head_dim": _int("linear-attention key head dim d_k"),
        "value_heads": _int("linear-attention value heads n_v"),
        "value_head_dim": _int("linear-attention value head dim d_v"),
        "conv": _int("short convolution kernel K"),
    },
    "mla": {
        "q_lora_rank": _int("query latent rank (0: no query latent)", 0),
        "kv_lora_rank": _int("key/value latent rank"),
        "rope_dim": _int("rotary part of the query/key head dim"),
        "nope_dim": _int("non-rotary part of the query/key head dim"),
        "v_head_dim": _int("value head dim"),
    },
}
"""The blocks a model may hold and their fields."""

REQUIRED_BLOCK_FIELDS: dict[str, tuple[str, ...]] = {
    "moe": ("experts", "top_k", "width"),
    "linear": ("key_heads", "key_head_dim", "value_heads", "value_head_dim", "conv"),
    "mla": ("kv_lora_rank", "rope_dim", "nope_dim", "v_head_dim"),
}

MODEL_CHOICES: dict[str, tuple[str, ...]] = {
    "norm": ("rmsnorm", "layernorm"),
    "mlp": ("gated", "plain"),
    "activation": ("silu", "gelu", "gelu_tanh", "relu", "relu2"),
}
"""`norm X`, `mlp X`, `activation X`: closed sets."""

# --------------------------------------------------------------------------
# Tensor-parallel layouts (a family's `layout { ... }` block)
# --------------------------------------------------------------------------

PLACEMENTS: dict[str, str] = {
    "colwise": "split over tp along the output features: dim 0 of a Linear weight [out, in] and of its bias",
    "rowwise": "split over tp along the input features: dim 1 of a Linear weight [out, in]",
    "replicate": "whole on every tp rank, which also ends backward with the whole gradient",
}
"""The placements a layout entry may give a parameter."""

PLACEMENT_DIMS: dict[str, int] = {"colwise": 0, "rowwise": 1}
"""The tensor dim a sharded placement splits when the entry names none (`colwise(2)` names one)."""

LAYOUT_AXES = ("cp", "ep", "pp")
"""Axis sizes a dims expression may read (`experts / ep`); not tp: dims are the shape before tp."""

SLOT_FAMILIES: dict[str, str] = {
    "attention": "attention",
    "linear_attention": "gated_delta_net",
    "mla": "mla",
    "mlp": "mlp",
    "experts": "grouped_experts",
    "shared_experts": "mlp",
}
"""The family that fills each slot role of a built layer (hpdsl/slots.py says which roles a layer has).

The torch backend builds each slot through this family unless told otherwise,
and the layout check proves divisibility for the models whose layers use it.
"""
