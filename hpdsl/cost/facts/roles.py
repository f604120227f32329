"""The slot roles the cost model tells apart (hpdsl/bound/slots.py names them)."""

from __future__ import annotations

MIXER_ROLES = frozenset({"attention", "linear_attention", "mla", "ssm", "cross_attention"})
"""Slot roles of a layer's mixer (hpdsl/bound/slots.py)."""

FEED_FORWARD_ROLES = frozenset({"mlp", "router", "latent_proj", "experts", "shared_experts", "shared_gate"})
"""Slot roles of a layer's feed-forward: a dense MLP, or a MoE block's parts (hpdsl/bound/slots.py `ffn_slots`)."""
