"""Every model field, declared once: its type, meaning, default, block and HuggingFace config keys.

A field's name is the same everywhere: the key written in a `.hpf` model (inside
its block for block fields), the key of the model in registry.json, the
attribute of the bound layer config (hpdsl/model/layer.py) and of the config a
module is built from, the name a family's layout dims read, and the row of the
importer's table. The checker (hpdsl/check/models.py), the IR, the importer
(hpdsl/importers/hf.py) and docs/language.md's field list all read FIELDS.
Adding a field is adding a row here (docs/language.md, "Adding a field").
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Literal, Union

import attrs

Scalar = Union[bool, int, float, str]
FieldType = Literal["int", "float", "bool", "string", "choice"]


@attrs.frozen
class Field:
    """One model field.

    `default` is the value a consumer uses when the model does not state the
    field (None: absent, and nothing is priced or built for it); `hf` are the
    config keys it is imported from, the first one stated winning.
    """

    name: str
    type: FieldType
    meaning: str
    block: str | None = None
    minimum: int | None = None
    default: Scalar | None = None
    required: bool = False
    hf: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    maximum: int | None = None


# The most layers a model may have (body and MTP each): far above any real model,
# and low enough that expanding, pricing and writing a stack stays quick.
MAX_LAYERS = 1 << 20

# The most layer groups (maximal runs of one kind; body and MTP each) a model may
# have: what a registry stores and the compiler walks grows with the groups, not the
# layers, so a short spec cannot ask for a huge registry (an alternating stack of
# MAX_LAYERS layers would be MAX_LAYERS groups).
MAX_GROUPS = 1 << 16

# The largest value of any other int field: products of two stay below 2^63.
MAX_DIMENSION = 1 << 31

# The most shared experts: each is a module (a slot) of its own, so the count is enumerated.
MAX_SHARED_EXPERTS = 1 << 10

# The largest op count or run fact: the largest integer literal (hpdsl/syntax/parser.py MAX_INT).
MAX_COUNT = 1 << 62


def _int(name: str, meaning: str, *, minimum: int = 1, block: str | None = None,
         default: int | None = None, required: bool = False, hf: tuple[str, ...] = (),
         maximum: int = MAX_DIMENSION) -> Field:
    return Field(name, "int", meaning, block, minimum, default, required, hf, maximum=maximum)


def _bool(name: str, meaning: str, *, block: str | None = None, hf: tuple[str, ...] = ()) -> Field:
    return Field(name, "bool", meaning, block, None, False, False, hf)


def _choice(name: str, meaning: str, choices: tuple[str, ...], default: str) -> Field:
    return Field(name, "choice", meaning, None, None, default, False, (), choices)


FIELDS: dict[str, Field] = {field.name: field for field in (
    _int("hidden", "hidden size h", required=True, hf=("hidden_size", "d_model", "n_embd")),
    _int("layers", "body layers, MTP excluded (both towers of an encoder-decoder)", required=True,
         hf=("num_hidden_layers", "num_layers", "n_layer"), maximum=MAX_LAYERS),
    _int("heads", "query heads a", required=True, hf=("num_attention_heads", "num_heads", "n_head")),
    _int("kv_heads", "key/value heads n_kv; default: heads", hf=("num_key_value_heads",)),
    _int("head_dim", "head dim d_h; default: hidden / heads", hf=("head_dim", "d_kv")),
    _int("vocab", "vocabulary size v", required=True, hf=("vocab_size",)),
    _int("ffn_width", "dense feed-forward width h_ff", hf=("intermediate_size", "d_ff", "n_inner")),
    _int("max_positions", "maximum sequence length", hf=("max_position_embeddings", "n_positions")),
    _int("first_k_dense", "dense layers before the MoE layers", minimum=0, hf=("first_k_dense_replace",),
         maximum=MAX_LAYERS),
    _int("mtp", "multi-token-prediction layers after the body", minimum=0, default=0,
         hf=("mtp_depth", "num_nextn_predict_layers", "mtp_num_hidden_layers"), maximum=MAX_LAYERS),
    _int("layer_norms", "normalisations per layer, when not the kind's normOp count", minimum=0),
    _int("position_buckets", "relative-position buckets, one bias table per tower (T5)",
         hf=("relative_attention_num_buckets",)),
    _int("sliding_window", "tokens a sliding-window layer (a kind with `attention sliding`) attends to",
         hf=("sliding_window",)),
    _bool("tie_embeddings", "the output head shares the embedding matrix", hf=("tie_word_embeddings",)),
    _bool("qk_norm", "per-head RMSNorm on queries and keys", hf=("qk_norm", "use_qk_norm", "qk_layernorm")),
    _bool("output_gate", "attention output gate (doubles the query projection)", hf=("attn_output_gate",)),
    _bool("qkv_bias", "q, k and v projections have biases"),
    _bool("o_bias", "the output projection has a bias"),
    _bool("mlp_bias", "feed-forward projections have biases", hf=("mlp_bias",)),
    _bool("norm_bias", "normalisations have a bias (LayerNorm)"),
    _bool("qk_norm_full", "the QK-norm spans the whole q and k projections, not one head (OLMoE)"),
    _bool("attention_sinks", "each attention has a learned sink logit per head (gpt-oss)"),
    _bool("learned_positions", "a learned absolute position table, max_positions × hidden (GPT-2)"),
    _bool("norm_offset", "norms scale by (1 + w) in fp32 and keep the normalised copy in fp32 (Gemma, Qwen3-Next)"),
    _bool("sandwich_norms", "a norm after each mixer and feed-forward too, before the residual (Gemma)"),
    _choice("norm", "the normalisation", ("rmsnorm", "layernorm"), "rmsnorm"),
    _choice("mlp", "the feed-forward form: gated (3 matrices) or plain (2)", ("gated", "plain"), "gated"),
    _choice("activation", "the feed-forward activation", ("silu", "gelu", "gelu_tanh", "relu", "relu2"), "silu"),
    # moe { }: mixture of experts
    _int("experts", "routed experts E", block="moe", required=True,
         hf=("num_experts", "n_routed_experts", "num_local_experts")),
    _int("top_k", "experts chosen per token k", block="moe", required=True, hf=("num_experts_per_tok", "experts_per_token")),
    _int("expert_width", "routed expert width h_e", block="moe", required=True, hf=("moe_intermediate_size",)),
    _int("shared_experts", "shared experts E_s", block="moe", minimum=0, default=0,
         hf=("n_shared_experts", "num_shared_experts"), maximum=MAX_SHARED_EXPERTS),
    _int("shared_width", "shared expert width; default: expert_width", block="moe",
         hf=("shared_expert_intermediate_size",)),
    _bool("shared_gate", "a sigmoid gate on the shared expert output", block="moe"),
    _bool("router_bias", "the router projection has a bias", block="moe"),
    # linear { }: Gated DeltaNet linear attention
    _int("key_heads", "linear-attention key heads n_k", block="linear", required=True,
         hf=("linear_num_key_heads",)),
    _int("key_head_dim", "linear-attention key head dim d_k", block="linear", required=True,
         hf=("linear_key_head_dim",)),
    _int("value_heads", "linear-attention value heads n_v", block="linear", required=True,
         hf=("linear_num_value_heads",)),
    _int("value_head_dim", "linear-attention value head dim d_v", block="linear", required=True,
         hf=("linear_value_head_dim",)),
    _int("conv", "linear-attention short convolution kernel K", block="linear", required=True,
         hf=("linear_conv_kernel_dim",)),
    # ssm { }: a selective state-space (Mamba) mixer; its family's layout reads these (families/mamba.hpf)
    _int("ssm_state", "state size N per channel (0: no state, no scan: a short convolution)", block="ssm",
         required=True, minimum=0,
         hf=("mamba_d_state", "ssm_state_size")),
    _int("ssm_conv", "depthwise causal convolution kernel K", block="ssm", required=True,
         hf=("mamba_d_conv", "conv_kernel")),
    _int("ssm_expand", "inner width over hidden: d_inner = ssm_expand × hidden", block="ssm", required=True,
         hf=("mamba_expand", "expand")),
    _int("ssm_dt_rank", "Mamba-1: rank of the time-step projection (HF \"auto\": ⌈hidden / 16⌉)", block="ssm",
         hf=("mamba_dt_rank", "time_step_rank")),
    _int("ssm_heads", "Mamba-2: heads H, each of head dim ssm_expand × hidden / H, one time step each",
         block="ssm", hf=("mamba_n_heads", "mamba_num_heads")),
    _int("ssm_groups", "Mamba-2: groups of heads sharing B and C", block="ssm", hf=("mamba_n_groups", "n_groups")),
    _int("ssm_chunk", "Mamba-2: tokens per chunk of the chunked (SSD) scan", block="ssm", default=256,
         hf=("mamba_chunk_size", "chunk_size")),
    _bool("ssm_conv_bias", "the convolution has a bias", block="ssm", hf=("mamba_conv_bias", "use_conv_bias")),
    _bool("ssm_proj_bias", "the in and out projections have biases", block="ssm", hf=("mamba_proj_bias",)),
    _bool("ssm_norms", "RMSNorms on the time step, B and C (Jamba)", block="ssm"),
    # mla { }: multi-head latent attention
    _int("q_lora_rank", "query latent rank (0: no query latent)", block="mla", minimum=0, default=0,
         hf=("q_lora_rank",)),
    _int("kv_lora_rank", "key/value latent rank", block="mla", required=True, hf=("kv_lora_rank",)),
    _int("rope_dim", "rotary part of the query/key head dim", block="mla", required=True,
         hf=("qk_rope_head_dim",)),
    _int("nope_dim", "non-rotary part of the query/key head dim", block="mla", required=True,
         hf=("qk_nope_head_dim",)),
    _int("v_head_dim", "value head dim", block="mla", required=True, hf=("v_head_dim",)),
)}
"""Every model field, top-level ones first, then each block's, in the order fmt and docs list them."""

BLOCKS: tuple[str, ...] = tuple(dict.fromkeys(f.block for f in FIELDS.values() if f.block is not None))
"""The blocks a model may hold (`moe { }`, `linear { }`, `ssm { }`, `mla { }`)."""


def top_level(*, kinds: tuple[FieldType, ...] | None = None) -> dict[str, Field]:
    """Return the fields written at a model's top level (of the given types, default all)."""
    return {n: f for n, f in FIELDS.items() if f.block is None and (kinds is None or f.type in kinds)}


def block_fields(block: str) -> dict[str, Field]:
    """Return the fields of one block, in table order."""
    return dict(_block_fields(block))


def block_flags() -> dict[str, Field]:
    """Return the flags inside blocks (`router_bias`, `shared_gate`): a profile's facts may state them."""
    return {n: f for n, f in FIELDS.items() if f.block is not None and f.type == "bool"}


@cache
def _block_fields(block: str) -> tuple[tuple[str, Field], ...]:
    return tuple((n, f) for n, f in FIELDS.items() if f.block == block)


@cache
def required(block: str | None) -> tuple[str, ...]:
    """Return the fields a model (block None) or a stated block must state (the table is constant)."""
    return tuple(n for n, f in FIELDS.items() if f.block == block and f.required)


def defaults() -> dict[str, Scalar | None]:
    """Return every field's default (None where absent means nothing is built)."""
    return {n: f.default for n, f in FIELDS.items()}


def check_names(values: Mapping[str, object], *, where: str) -> None:
    """Raise KeyError naming the first key of `values` that is not a field."""
    for name in values:
        if name not in FIELDS:
            raise KeyError(f"{where}: '{name}' is not a model field")


# --------------------------------------------------------------------------
# Profile-level tables: run facts and a profile's `model { }` facts
# --------------------------------------------------------------------------


@attrs.frozen
class Fact:
    """A run fact or profile model fact: type, meaning and default."""

    name: str
    type: Literal["int", "bool"]
    meaning: str
    default: int | bool | None
    minimum: int | None = None


RUN_FACTS: dict[str, Fact] = {fact.name: fact for fact in (
    # Unstated (None): from the strategy's precision and optimizer (hpdsl/cost/facts/precision.py).
    Fact("grad_bytes", "int", "bytes per gradient element (unstated: the precision's)", None, 0),
    Fact("optimizer_state_bytes", "int", "bytes per optimizer-state element (unstated: the optimizer's)",
         None, 0),
    Fact("optimizer_states", "int", "optimizer states per parameter (unstated: the optimizer's)", None, 0),
    Fact("main_param_bytes", "int", "bytes of the master copy per parameter (unstated: the precision's)",
         None, 0),
    Fact("norm_bytes", "int", "bytes per saved normalisation input element", 4, 0),
    Fact("dropout_bytes", "int", "bytes per dropout-mask element", 0, 0),
    Fact("grad_accumulation", "bool", "gradients take memory even without pipeline parallelism", True),
    Fact("shard_activations", "bool", "TP shards the activations between layers and the output layer's", False),
    Fact("loss_parallel", "bool", "the loss runs on vocab-sharded logits", True),
    Fact("reshard_params", "bool", "FSDP frees a layer's gathered parameters after it has run", False),
    Fact("deferred_grad_accumulation", "bool", "the micro-batches' gradients accumulate unsharded and ZeRO reduces "
         "them once, after the last backward", False),
    Fact("overlapped_grad_reduce", "bool", "gradient reduction overlaps the backward pass", False),
    # transformers' modules (--impl hf-sdpa / hf-eager; docs/cost-model.md#activations-per-implementation).
    Fact("norm_keeps_input", "bool", "the norm scales its compute-width input, not its fp32 copy, by the root "
         "(its backward keeps both)", False),
    Fact("loss_upcast", "bool", "the loss takes fp32 logits (false: log-softmax at the compute width)", True),
    # What hpdsl's torch backend does (hpdsl/cost/facts/backend.py sets them for `hpdsl train`).
    Fact("gathered_tp_input", "bool", "under SP a tensor-parallel region gathers the sequence before its first "
         "linears, which keep the gathered input (false: they keep their chunk)", False),
    Fact("routed_tokens_split", "bool", "each tp rank routes its own share of the tokens (false: every tp rank "
         "routes the whole sequence)", True),
    Fact("cp_gathered_kv", "bool", "context parallelism all-gathers the keys and values, which attention keeps "
         "whole with its mask (false: ring attention passes chunks)", False),
    Fact("cpu_attention", "bool", "SDPA runs on CPU: its math kernel where CPU flash cannot", False),
)}
"""The only run facts a profile may state (`run { }`), with the value an unstated fact has."""

PROFILE_MODEL_FACTS: dict[str, Fact] = {
    "v_head_dim": Fact("v_head_dim", "int", "value head dim the profile prices MLA attention with", None, 1),
}
"""The keys of a profile's `model { }` block."""

__all__ = ["BLOCKS", "FIELDS", "Fact", "Field", "FieldType", "PROFILE_MODEL_FACTS", "RUN_FACTS", "Scalar",
           "block_fields", "block_flags", "check_names", "defaults", "required", "top_level"]


def render_table() -> str:
    """Return the Markdown table of every model field that docs/language.md embeds."""
    rows = ["| field | block | type | meaning | default | HuggingFace keys |", "|---|---|---|---|---|---|"]
    for field in FIELDS.values():
        kind = f"{field.type} ≥ {field.minimum}" if field.minimum is not None else field.type
        if field.choices:
            kind = " \\| ".join(field.choices)
        default = "required" if field.required else ("–" if field.default is None else str(field.default).lower())
        keys = ", ".join(f"`{key}`" for key in field.hf) or "–"
        rows.append(f"| `{field.name}` | {field.block or '–'} | {kind} | {field.meaning} | {default} | {keys} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render_table(), end="")
