"""A bound layer (hpdsl.cost.bind) into its slots: the role each module of the layer fills and its config.

A built layer holds a mixer (full attention, a Gated DeltaNet for a linear
kind, or MLA when the model has an `mla` block), a cross-attention in an
encoder-decoder's decoder, and a feed-forward block: a dense MLP, or routed
experts plus shared experts. Each slot is filled through the family
spec.SLOT_FAMILIES names for its role, from a ModuleConfig.

The torch backend (hpdsl/torch/model.py) builds every slot from these
functions, and the layout check (hpdsl/check/layouts.py) evaluates the layout
dims of every slot with them, so what the check proves about a model's
parameters holds for the modules the backend builds. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import attrs

from hpdsl.cost.bind import CostModel, LayerConfig
from hpdsl.ir.nodes import ModelIR


@attrs.frozen
class ModuleConfig:
    """What a reference module is built from: one layer's dimensions and flags."""

    hidden: int
    heads: int = 1
    head_dim: int = 1
    kv_heads: int = 1
    attn_kind: str = "full"          # full | linear | mla
    output_gate: bool = False
    qk_norm: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    ffn_width: int = 0
    gated: bool = True               # gate·up·down (3 matrices) or up·down (2)
    activation: str = "silu"
    mlp_bias: bool = False
    experts: int = 1
    top_k: int = 1
    shared_experts: int = 0
    shared_width: int = 0
    shared_gate: bool = False
    router_bias: bool = False
    lin_key_heads: int = 0
    lin_key_head_dim: int = 0
    lin_value_heads: int = 0
    lin_value_head_dim: int = 0
    lin_conv: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_dim: int = 0
    nope_dim: int = 0
    norm: str = "rmsnorm"            # rmsnorm | layernorm
    norm_bias: bool = False
    norm_eps: float = 1e-6
    rope: bool = True                # False under relative position buckets (T5)
    rope_theta: float = 10000.0
    causal: bool = True
    vocab: int = 0                   # the embedding's and output head's rows

    @classmethod
    def from_layer(cls, layer: LayerConfig, model: ModelIR, *, gated: bool = True,
                   causal: bool = True) -> ModuleConfig:
        """Return the module config of a layer priced with `layer` in `model`."""
        kv_heads = layer.kv_heads
        return cls(
            hidden=layer.hidden, heads=layer.heads, head_dim=layer.head_dim,
            kv_heads=int(kv_heads) if float(kv_heads).is_integer() else 0,
            attn_kind=layer.attn_kind, output_gate=layer.output_gate, qk_norm=layer.qk_norms > 0,
            qkv_bias=layer.qkv_bias, o_bias=layer.o_bias, ffn_width=layer.ffn_width, gated=gated,
            activation=model.activation or "silu", mlp_bias=layer.mlp_bias, experts=layer.experts,
            top_k=layer.top_k, shared_experts=layer.shared_experts, shared_width=layer.shared_width,
            shared_gate=layer.shared_gate, router_bias=layer.router_bias,
            lin_key_heads=layer.lin_key_heads, lin_key_head_dim=layer.lin_key_head_dim,
            lin_value_heads=layer.lin_value_heads, lin_value_head_dim=layer.lin_value_head_dim,
            lin_conv=layer.lin_conv, q_lora_rank=layer.q_lora_rank, kv_lora_rank=layer.kv_lora_rank,
            rope_dim=layer.rope_dim, nope_dim=layer.nope_dim, norm=model.norm or "rmsnorm",
            norm_bias=layer.norm_bias, rope=not model.position_buckets, causal=causal,
            vocab=layer.vocab,
        )

    @property
    def q_head_dim(self) -> int:
        """Return MLA's query/key head dim (no-position part plus rotary part)."""
        return (self.nope_dim or self.head_dim) + self.rope_dim


DIM_NAMES: tuple[str, ...] = tuple(
    f.name for f in attrs.fields(ModuleConfig) if f.type in ("int", "bool"))
"""The config names a layout's dims may read: ints as they are, flags as 1 (set) or 0."""


def dim_environment(config: object) -> dict[str, int]:
    """Return the DIM_NAMES values `config` has (a ModuleConfig or any object with those attributes)."""
    env: dict[str, int] = {}
    for name in DIM_NAMES:
        value = getattr(config, name, None)
        if isinstance(value, bool):
            env[name] = int(value)
        elif isinstance(value, int):
            env[name] = value
    return env


@attrs.frozen
class Slot:
    """One module of a layer: its role, its path inside the layer, the config it is built from."""

    role: str
    path: str
    config: ModuleConfig


# --------------------------------------------------------------------------
# Roles and their configs
# --------------------------------------------------------------------------


def layer_shape(layer: LayerConfig) -> tuple[Fraction, int]:
    """Return (attentions, feed-forward matrices) a layer's op vector prices: attMM / 4 and ffMM."""
    return Fraction(layer.ops.get("attMM", 0), 4), layer.ops.get("ffMM", 0)


def mixer_role(config: ModuleConfig) -> str:
    """Return the role of a layer's mixer: linear_attention, mla or attention."""
    return {"linear": "linear_attention", "mla": "mla"}.get(config.attn_kind, "attention")


def cross_attention_config(config: ModuleConfig) -> ModuleConfig:
    """Return the config of a decoder layer's cross-attention (not causal, no QK-norm)."""
    return attrs.evolve(config, causal=False, qk_norm=False)


def shared_expert_config(config: ModuleConfig) -> ModuleConfig:
    """Return the config of one shared expert: an MLP as wide as the shared width."""
    return attrs.evolve(config, ffn_width=config.shared_width)


def ffn_slots(config: ModuleConfig, path: str = "ffn") -> tuple[Slot, ...]:
    """Return the feed-forward slots: one MLP, or routed experts and each shared expert."""
    if config.experts <= 1:
        return (Slot("mlp", path, config),)
    shared = shared_expert_config(config)
    return (Slot("experts", f"{path}.experts", config),
            *(Slot("shared_experts", f"{path}.shared_experts.{i}", shared)
              for i in range(config.shared_experts)))


def layer_slots(layer: LayerConfig, model: ModelIR, *, causal: bool = True) -> tuple[Slot, ...]:
    """Return every slot of a layer priced with `layer`; () when its op vector prices no buildable layer."""
    attentions, matrices = layer_shape(layer)
    if attentions not in (1, 2) or matrices not in (0, 2, 3):
        return ()
    config = ModuleConfig.from_layer(layer, model, gated=matrices == 3, causal=causal)
    slots = [Slot(mixer_role(config), "mixer", config)]
    if attentions == 2:
        slots.append(Slot("attention", "cross_attention", cross_attention_config(config)))
    if matrices:
        slots.extend(ffn_slots(config))
    return tuple(slots)


def model_slots(cost: CostModel) -> Iterator[tuple[str | None, Slot]]:
    """Yield (kind, slot) for every slot of every distinct kind of a bound model, in stack order."""
    for kind in dict.fromkeys(cost.layer_kinds()):
        layer = cost.kind_config(kind if kind in cost.kinds else None)
        for slot in layer_slots(layer, cost.model):
            yield kind, slot


__all__ = ["DIM_NAMES", "ModuleConfig", "Slot", "cross_attention_config", "dim_environment",
           "ffn_slots", "layer_shape", "layer_slots", "mixer_role", "model_slots", "shared_expert_config"]
