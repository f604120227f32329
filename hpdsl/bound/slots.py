"""A bound layer (hpdsl.bound.bind) into its slots: the role each module of the layer fills and its config.

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

from hpdsl.bound.bind import CostModel
from hpdsl.bound.config import LayerConfig, ModuleConfig
from hpdsl.ir.nodes import evolve
from hpdsl.model import ops


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
    """Return (attentions, feed-forward matrices) a layer's op vector prices."""
    return ops.attentions(layer.ops), ops.ffn_matrices(layer.ops)


def mixer_role(config: ModuleConfig) -> str:
    """Return the role of a layer's mixer: linear_attention, mla or attention."""
    return {"linear": "linear_attention", "mla": "mla"}.get(config.attn_kind, "attention")


def cross_attention_config(config: ModuleConfig) -> ModuleConfig:
    """Return the config of a decoder layer's cross-attention (not causal, no QK-norm)."""
    return evolve(config, causal=False, qk_norm=False)


def shared_expert_config(config: ModuleConfig) -> ModuleConfig:
    """Return the config of one shared expert: an MLP as wide as the shared width."""
    return evolve(config, ffn_width=config.shared_width)


def ffn_slots(config: ModuleConfig, path: str = "ffn") -> tuple[Slot, ...]:
    """Return the feed-forward slots: one MLP, or routed experts and each shared expert."""
    if config.experts <= 1:
        return (Slot("mlp", path, config),)
    shared = shared_expert_config(config)
    return (Slot("experts", f"{path}.experts", config),
            *(Slot("shared_experts", f"{path}.shared_experts.{i}", shared)
              for i in range(config.shared_experts)))


def layer_slots(layer: LayerConfig, *, causal: bool = True) -> tuple[Slot, ...]:
    """Return every slot of a layer priced with `layer`; () when its op vector prices no buildable layer."""
    attentions, matrices = layer_shape(layer)
    if attentions not in (1, 2) or matrices not in (0, 2, 3):
        return ()
    config = evolve(layer, gated=matrices == 3, causal=causal)
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
        for slot in layer_slots(layer):
            yield kind, slot


__all__ = ["Slot", "cross_attention_config", "ffn_slots", "layer_shape", "layer_slots", "mixer_role",
           "model_slots", "shared_expert_config"]
