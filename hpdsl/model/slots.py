"""The slots of a built model: which module each is, and which family the standard library binds to it.

A layer holds a mixer (one of the attention slots, chosen by the kind's
attention flavour and the model's `mla` block), an optional cross-attention,
a feed-forward block (a dense MLP, or routed experts plus shared experts) and
a norm before each of them; the model holds an embedding, a final norm and an
output head. Which family fills a slot is data: `slots { ... }` blocks in .hpf
(docs/language.md) bind each slot name below to a family.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class SlotSpec:
    """One slot: its name in `slots { ... }` and what the module filling it does."""

    name: str
    meaning: str
    scope: str  # "layer" (once per layer that has it) or "model" (once per model)


SLOTS: dict[str, SlotSpec] = {spec.name: spec for spec in (
    SlotSpec("attention", "full (softmax) self-attention, and an encoder-decoder's cross-attention", "layer"),
    SlotSpec("linear_attention", "the mixer of a kind with `attention linear`", "layer"),
    SlotSpec("ssm", "the mixer of a kind with `attention ssm`: a selective state-space model", "layer"),
    SlotSpec("mla", "the mixer of every layer of a model with an `mla` block", "layer"),
    SlotSpec("mlp", "the dense feed-forward block", "layer"),
    SlotSpec("experts", "the routed experts of a MoE feed-forward block", "layer"),
    SlotSpec("shared_experts", "each shared expert of a MoE feed-forward block", "layer"),
    SlotSpec("router", "the router of a MoE feed-forward block: each token's score for every routed expert", "layer"),
    SlotSpec("shared_gate", "the sigmoid gate over a MoE block's shared experts (with `shared_gate`)", "layer"),
    SlotSpec("latent_proj", "a MoE block's projections hidden → latent_width before its routed experts and back "
             "after (with `latent_width`; Nemotron 3 Super's fc1_latent_proj and fc2_latent_proj)", "layer"),
    SlotSpec("per_layer_input", "a layer's per-layer input block (with `per_layer_width`, Gemma 4's PLE): a gate "
             "hidden → per_layer_width, times the layer's per-layer input, projected back to hidden", "layer"),
    SlotSpec("hyper_connection", "a block's manifold-constrained hyper-connection (with `hc_mult`, DeepSeek-V4's mHC): "
             "the hc_mult residual streams mixed into the block's input, its output spread back, the streams mixed",
             "layer"),
    SlotSpec("norm", "every normalisation: before each mixer and feed-forward, and the final norm", "layer"),
    SlotSpec("embedding", "the token embedding", "model"),
    SlotSpec("head", "the output head (absent when tied to the embedding)", "model"),
    SlotSpec("cross_attention", "the mixer of a kind with `attention cross`: a cross-attention to an encoder or "
             "vision stream, the layer's only attention (Mllama)", "layer"),
    SlotSpec("gate", "a learnt scalar gate on each block's output, where the kind is `wiring gated`", "layer"),
    SlotSpec("position_bias", "T5's relative-position bias table of each tower (with `position_buckets`)", "model"),
    SlotSpec("project_in", "the projection of the token embeddings (embed_width wide) up to hidden before the "
             "first layer, where the model states an embed_width other than hidden (OPT-350m)", "model"),
    SlotSpec("project_out", "the projection of the last hidden states down to embed_width before the head, "
             "where the model states an embed_width other than hidden (OPT-350m)", "model"),
    SlotSpec("per_layer_proj", "the projection of the token embeddings hidden → layers · per_layer_width that "
             "each layer's per-layer input is made from beside its table (with `per_layer_width`, Gemma 4's PLE)",
             "model"),
    SlotSpec("hyper_head", "the last collapse of the hc_mult residual streams into one before the final norm "
             "(with `hc_mult`, DeepSeek-V4's hc_head)", "model"),
    SlotSpec("mtp_proj", "each MTP layer's projection of its normalised embedding and hidden state (2·hidden "
             "wide) back to hidden, where the model states mtp (DeepSeek-V3's eh_proj)", "model"),
)}
"""Every slot a `slots { ... }` block may bind, in the order docs list them."""

KIND_DIM_FIELDS = ("heads", "kv_heads", "head_dim", "value_dim", "attention_sinks", "qk_norm", "qkv_bias", "o_bias",
                   "k_eq_v", "no_rope", "index_n_heads", "kv_shared", "ffn_width", "compress_ratio",
                   "compress_indexed")
"""The fields a kind's `dims { }` may set in its layers: their head shapes, attention flags and feed-forward width
(hpdsl/check/kind_dims.py; `no_rope`: no-position layers; `index_n_heads = 0`: no DSA indexer, GLM-5.2's
shared-index layers; `kv_shared`: layers reusing an earlier layer's keys and values, and `ffn_width` their
double-wide MLPs, Gemma 4's; `compress_ratio` and `compress_indexed`: DeepSeek-V4's compressed layers); the model-wide fields (hidden, vocab, layers, ...) stay the model's."""

ATTENTION_FLAVOURS = ("full", "linear", "sliding", "ssm", "cross")
"""A kind's `attention` flavour: full fills the attention slot (mla with an `mla` block), linear
linear_attention, sliding the attention slot with each query seeing the model's `sliding_window`
latest positions, ssm the ssm slot (its parameters and matmuls come from the bound family's layout),
cross the cross_attention slot: the layer attends to a given stream, not to itself (Mllama)."""

FFN_FLAVOURS = ("dense", "moe")
"""A kind's `ffn` flavour: dense fills the mlp slot, moe the router, experts, shared_experts, shared_gate and
latent_proj slots."""

__all__ = ["ATTENTION_FLAVOURS", "FFN_FLAVOURS", "SLOTS", "SlotSpec"]
