"""The slot roles the cost model tells apart (hpdsl/bound/slots.py names them)."""

from __future__ import annotations

MIXER_ROLES = frozenset({"attention", "linear_attention", "mla", "ssm", "cross_attention"})
"""Slot roles of a layer's mixer (hpdsl/bound/slots.py)."""
