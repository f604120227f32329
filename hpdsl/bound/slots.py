"""A bound layer into its slots: which slot each module of a layer fills, the family bound to it, its config.

A built layer holds a mixer (full attention, a Gated DeltaNet for a linear
kind, or MLA when the model has an `mla` block), a cross-attention in an
encoder-decoder's decoder, a feed-forward block (a dense MLP, or routed experts
plus shared experts) and the norms its wiring places (hpdsl/bound/wiring.py:
before each block, after it, both, or one shared by a parallel mixer and
feed-forward); a Megatron-style hybrid's layer
(Nemotron-H) holds only the mixer (ffMM 0) or only the feed-forward (attMM 0); the model holds an embedding, a
final norm per tower and, unless tied, an output head; each MTP layer holds,
beside its decoder layer, two input norms, their projection and a head norm
(`mtp_slots`). The family filling each
slot is the kind's (or the profile's) binding from `.hpf` `slots { ... }`
blocks (KindIR.slots, ProfileIR.slots), never Python.

The torch backend (hpdsl/torch/model.py) builds every slot from these
functions, the layout check (hpdsl/check/layouts.py) evaluates the layout dims
of every slot with them, and the estimator reads each slot's family layout
(hpdsl/cost/facts/replication.py), so all three see the same modules. Nothing here
imports torch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction

import attrs

from hpdsl.bound import wiring
from hpdsl.bound.bind import CostModel
from hpdsl.bound.config import LayerConfig, ModuleConfig
from hpdsl.ir.nodes import evolve
from hpdsl.model import ops


@attrs.frozen
class Slot:
    """One module: the slot it fills (its role), its path, the config it is built from, its family."""

    role: str
    path: str
    config: ModuleConfig
    family: str = ""


# --------------------------------------------------------------------------
# Roles and their configs
# --------------------------------------------------------------------------


def layer_shape(layer: LayerConfig) -> tuple[Fraction, int]:
    """Return (attentions, feed-forward matrices) a layer's op vector prices."""
    return ops.attentions(layer.ops), ops.ffn_matrices(layer.ops)


def mixer_role(config: ModuleConfig) -> str:
    """Return the role of a layer's mixer: linear_attention, mla, ssm, cross_attention or attention."""
    return {"linear": "linear_attention", "mla": "mla", "ssm": "ssm",
            "cross": "cross_attention"}.get(config.attn_kind, "attention")


def crosses(config: ModuleConfig) -> bool:
    """Whether a layer's one attention is a cross-attention to a given stream (a kind with `attention cross`)."""
    return bool(config.attn_kind == "cross")


def cross_mixer_config(config: ModuleConfig) -> ModuleConfig:
    """Return the config of a cross kind's cross-attention: not causal, no window, per-head norms if cross_qk_norm."""
    return evolve(config, causal=False, window=0, qk_norm=config.cross_qk_norm, qk_norm_full=False,
                  output_gate=False, attention_sinks=False, q_norm_width=config.head_dim,
                  k_norm_width=config.head_dim)


def cross_attention_config(config: ModuleConfig) -> ModuleConfig:
    """Return the config of a decoder layer's cross-attention (not causal, no QK-norm)."""
    return evolve(config, causal=False, qk_norm=False)


def shared_expert_config(config: ModuleConfig) -> ModuleConfig:
    """Return the config of one shared expert: an MLP as wide as the shared width."""
    return evolve(config, ffn_width=config.shared_width)


def experts_config(config: ModuleConfig) -> ModuleConfig:
    """Return the config of the routed experts: latent_width wide in and out where the model states it, else hidden."""
    return evolve(config, hidden=config.latent_width) if config.latent_width else config


def ffn_slots(config: ModuleConfig, bindings: Mapping[str, str], path: str = "ffn") -> tuple[Slot, ...]:
    """Return the feed-forward slots: one MLP, or the router, latent projections, routed experts, shared experts, gate.

    With latent_width (Nemotron 3 Super) the routed experts read and write the
    latent vector (experts_config) and the latent_proj slot holds the projections
    to it and back; the router and the shared experts read the hidden vector.
    """
    if config.experts <= 1:
        return (_slot("mlp", path, config, bindings),)
    beside = beside_slots(config, bindings, path)
    shared = shared_expert_config(config)
    gate = (_slot("shared_gate", f"{path}.shared_expert_gate", config, bindings),) \
        if config.shared_experts and config.shared_gate else ()
    latent = (_slot("latent_proj", f"{path}.latent_proj", config, bindings),) if config.latent_width else ()
    return (_slot("router", f"{path}.router", config, bindings), *latent,
            _slot("experts", f"{path}.experts", experts_config(config), bindings),
            *(_slot("shared_experts", f"{path}.shared_experts.{i}", shared, bindings)
              for i in range(config.shared_experts)), *gate, *beside)


BESIDE_PATHS = ("mlp", "mlp_post_norm", "moe_norm", "moe_post_norm")
"""What a MoE layer with mlp_beside holds beside its router and experts (Gemma 4's enable_moe_block)."""


def beside_slots(config: ModuleConfig, bindings: Mapping[str, str], path: str = "ffn") -> tuple[Slot, ...]:
    """Return the dense MLP beside the routed experts and the branches' norms; () without beside_width.

    As transformers' Gemma4TextDecoderLayer: the MLP (beside_width wide) reads the
    layer's feed-forward norm and is normed after (mlp_post_norm); the experts read
    their own norm of the residual stream (moe_norm) and are normed after
    (moe_post_norm); the router reads the residual stream itself.
    """
    if not config.beside_width:
        return ()
    mlp = evolve(config, ffn_width=config.beside_width, experts=1, top_k=1, ep=1)
    return (_slot("mlp", f"{path}.mlp", mlp, bindings),
            *(_slot("norm", f"{path}.{name}", config, bindings) for name in BESIDE_PATHS[1:]))


def layer_config(layer: LayerConfig, *, causal: bool = True) -> ModuleConfig:
    """Return the config a layer's modules are built from: the bound layer with its built form."""
    matrices = ops.ffn_matrices(layer.ops)
    full = layer.qk_norm_full
    return evolve(layer, gated=matrices == 3, mlp="gated" if matrices == 3 else "plain", causal=causal,
                  q_norm_width=int(layer.heads * layer.head_dim if full else layer.head_dim),
                  k_norm_width=int(layer.kv_heads * layer.head_dim if full else layer.head_dim),
                  value_width=int(layer.value_dim or layer.head_dim))


def buildable(attentions: Fraction, matrices: int) -> bool:
    """Whether an op vector's (attentions, feed-forward matrices) make a layer: a mixer, a feed-forward or both.

    A Megatron-style hybrid (Nemotron-H) has mixer-only layers (ffMM 0) and
    feed-forward-only layers (attMM 0); a layer with neither is no layer.
    """
    return attentions in (0, 1, 2) and matrices in (0, 2, 3) and (attentions > 0 or matrices > 0)


def layer_slots(layer: LayerConfig, bindings: Mapping[str, str], *, causal: bool = True) -> tuple[Slot, ...]:
    """Return every slot of a layer priced with `layer`; () when its op vector prices no buildable layer.

    Its norms are those its wiring holds (hpdsl/bound/wiring.py), each listed
    beside the block it serves: before it when it runs first, after it otherwise.
    """
    attentions, matrices = layer_shape(layer)
    if not buildable(attentions, matrices):
        return ()
    config = layer_config(layer, causal=causal)
    cross = crosses(config)
    modules = {"mixer": [_slot(mixer_role(config), "mixer", config, bindings)],
               "cross": [_slot("cross_attention", "cross_attention", cross_mixer_config(config), bindings)
                         if cross else _slot("attention", "cross_attention", cross_attention_config(config), bindings)],
               "ffn": list(ffn_slots(config, bindings))}
    shape = (config.wiring, int(attentions), matrices > 0)
    for block, path in wiring.norm_paths(*shape, cross=cross):
        norm = _slot("norm", path, config, bindings)
        modules[block] = [norm, *modules[block]] if path == f"{block}_norm" else [*modules[block], norm]
    for block, path in wiring.gate_paths(*shape, cross=cross):
        modules[block].append(_slot("gate", path, config, bindings))
    for block, path in hyper_paths(config, *shape[1:], cross=cross):
        modules[block].insert(0, _slot("hyper_connection", path, config, bindings))
    blocks = tuple(slot for block in wiring.blocks(*shape[1:], cross=cross) for slot in modules[block])
    return (*blocks, *per_layer_slots(config, bindings))


def hyper_paths(config: ModuleConfig, attentions: int, ffn: bool, *, cross: bool = False) -> tuple[tuple[str, str], ...]:
    """Return (block, path) of each block's hyper-connection (mixer_hc, ffn_hc) where the model states hc_mult.

    As transformers' DeepseekV4DecoderLayer (attn_hc, ffn_hc): each runs before its block's norm, reading
    the hc_mult residual streams (hpdsl/torch/layers.py `DecoderLayer`).
    """
    if not config.hc_mult:
        return ()
    return tuple((block, f"{block}_hc") for block in wiring.blocks(attentions, ffn, cross=cross))


PER_LAYER_PATHS = ("per_layer_input", "per_layer_post_norm")
"""What a layer holds after its feed-forward where the model states per_layer_width (Gemma 4's PLE)."""


def per_layer_slots(config: ModuleConfig, bindings: Mapping[str, str]) -> tuple[Slot, ...]:
    """Return a layer's per-layer input block and the norm after it; () without per_layer_width."""
    if not config.per_layer_width:
        return ()
    return (_slot("per_layer_input", "per_layer_input", config, bindings),
            _slot("norm", "per_layer_post_norm", config, bindings))


def kind_bindings(cost: CostModel, kind: str | None) -> Mapping[str, str]:
    """Return which family fills each slot in layers of `kind` (None: the profile's own bindings)."""
    bound = cost.profile.kinds.get(kind) if kind is not None else None
    return bound.slots if bound is not None and bound.slots else cost.profile.slots


def model_slots(cost: CostModel) -> Iterator[tuple[str | None, Slot]]:
    """Yield (kind, slot) for every slot of every distinct kind of a bound model, in stack order."""
    for kind in cost.distinct_kinds():
        layer = cost.kind_config(kind if kind in cost.kinds else None)
        for slot in layer_slots(layer, kind_bindings(cost, kind)):
            yield kind, slot


def end_slots(cost: CostModel) -> tuple[Slot, ...]:
    """Return the model-level slots in the order a token meets them, as the model's outer wiring declares.

    The embedding; project_in where the table's embed_width is not hidden; the
    embedding norm (embed_norm); the learned positions; the final norm (unless
    no_final_norm); project_out; the head (unless tied). The torch builder, the
    estimator and the checks all read this one list (docs/language.md, "The
    model's outer wiring").
    """
    config, bindings, model = cost.base, cost.profile.slots, cost.model
    projects = projected(cost)
    slots = [_slot("embedding", "embed", config, bindings)]
    if projects:
        slots.append(_slot("project_in", "project_in", config, bindings))
    if model.embed_norm:
        slots.append(_slot("norm", "embed_norm", config, bindings))
    if model.learned_positions:
        slots.append(_slot("embedding", "positions", positions_config(cost), bindings))
    if model.hc_mult:  # DeepSeek-V4: the hc_mult residual streams collapse into one before the final norm
        slots.append(_slot("hyper_head", "hc_head", config, bindings))
    if not model.no_final_norm:
        slots.append(final_norm_slot(cost))
    if projects:
        slots.append(_slot("project_out", "project_out", config, bindings))
    if not model.tie_embeddings:
        slots.append(_slot("head", "head", config, bindings))
    return (*slots[:1], *per_layer_end_slots(cost), *slots[1:], *position_bias_slots(cost))


def per_layer_end_slots(cost: CostModel) -> tuple[Slot, ...]:
    """Return what makes each layer's per-layer input (Gemma 4's PLE); () without per_layer_width.

    Its table (an embedding slot: per_layer_vocab rows, layers · per_layer_width
    wide, its rows times √per_layer_width under embed_scale), the projection of
    the token embeddings to the same width (per_layer_proj) and the norm of each
    layer's per_layer_width-wide share of it (hpdsl/torch/layers.py `CausalLM`).
    """
    width = cost.model.per_layer_width or 0
    if not width:
        return ()
    config, bindings = cost.base, cost.profile.slots
    wide = width * cost.model.layers
    table = evolve(config, vocab=cost.model.per_layer_vocab or config.vocab, embed_width=wide,
                   embed_extra_rows=0, hidden=width)
    return (_slot("embedding", "per_layer_embed", table, bindings),
            _slot("per_layer_proj", "per_layer_proj", evolve(config, embed_width=wide), bindings),
            _slot("norm", "per_layer_norm", evolve(config, hidden=width), bindings))


def position_bias_slots(cost: CostModel) -> tuple[Slot, ...]:
    """Return T5's relative-position bias table of each tower: bidirectional in an encoder (not causal)."""
    if not cost.model.position_buckets:
        return ()
    bindings = cost.profile.slots
    if {"encoder", "decoder"} <= {g.kind for g in cost.model.groups}:
        return (_slot("position_bias", "encoder.position_bias", evolve(cost.base, causal=False), bindings),
                _slot("position_bias", "decoder.position_bias", cost.base, bindings))
    return (_slot("position_bias", "position_bias", cost.base, bindings),)


EMBEDDING_END = ("embed", "per_layer_embed", "per_layer_proj", "per_layer_norm", "project_in", "embed_norm",
                 "positions")
"""The end slots' paths that run before the first layer (the estimator's embedding column); the rest follow the last."""


def projected(cost: CostModel) -> bool:
    """Whether the model's token table is narrower or wider than hidden, so project_in and project_out exist."""
    return cost.model.embed_width is not None and cost.model.embed_width != cost.model.hidden


MTP_PATHS = ("enorm", "hnorm", "eh_proj", "norm")
"""What an MTP layer holds beside its decoder layer (`layer`), named as hpdsl/torch/layers.py `MTPLayer` names it."""


def mtp_slots(cost: CostModel) -> tuple[Slot, ...]:
    """Return the slots one MTP layer holds beside its decoder layer; () for a model without MTP layers.

    The norm of the next token's embedding (enorm) and of the previous depth's
    hidden state (hnorm), their concatenation's 2·hidden → hidden projection
    (eh_proj, the mtp_proj slot) and the norm before the shared head (norm),
    all on the model's base config and the profile's bindings (model-level,
    like the final norm), in the order a token meets them.
    """
    if not any(g.mtp for g in cost.model.groups):
        return ()
    config, bindings = cost.base, cost.profile.slots
    roles = {"enorm": "norm", "hnorm": "norm", "eh_proj": "mtp_proj", "norm": "norm"}
    return tuple(_slot(roles[path], path, config, bindings) for path in MTP_PATHS)


def final_norm_slot(cost: CostModel) -> Slot:
    """Return the final norm's slot (whether or not the model has one: no_final_norm)."""
    return _slot("norm", "norm", cost.base, cost.profile.slots)


def positions_config(cost: CostModel) -> ModuleConfig:
    """Return the config of a learned absolute position table: max_positions + position_offset rows, hidden wide."""
    rows = (cost.model.max_positions or 0) + (cost.model.position_offset or 0)
    return evolve(cost.base, vocab=rows, embed_extra_rows=0, embed_width=cost.base.hidden)


def _slot(role: str, path: str, config: ModuleConfig, bindings: Mapping[str, str]) -> Slot:
    return Slot(role, path, config, bindings.get(role, ""))


__all__ = ["BESIDE_PATHS", "EMBEDDING_END", "beside_slots", "MTP_PATHS", "PER_LAYER_PATHS", "Slot", "buildable", "cross_attention_config", "cross_mixer_config", "crosses", "end_slots",
           "experts_config", "ffn_slots",
           "final_norm_slot", "hyper_paths", "kind_bindings", "layer_config", "layer_shape", "position_bias_slots", "positions_config",
           "layer_slots", "mtp_slots", "per_layer_end_slots", "per_layer_slots", "projected", "mixer_role",
           "model_slots",
           "shared_expert_config"]
