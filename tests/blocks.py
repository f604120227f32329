"""Model blocks as the flat fields a ModelIR holds them in, for tests that build models by hand."""

from __future__ import annotations

from typing import Any


def moe(experts: int, top_k: int, expert_width: int, shared_experts: int = 0, shared_width: int | None = None,
        shared_gate: bool | None = None, router_bias: bool | None = None) -> dict[str, Any]:
    """Return a moe block's fields."""
    return {"experts": experts, "top_k": top_k, "expert_width": expert_width, "shared_experts": shared_experts,
            "shared_width": shared_width, "shared_gate": shared_gate, "router_bias": router_bias}


def linear(key_heads: int, key_head_dim: int, value_heads: int, value_head_dim: int, conv: int) -> dict[str, Any]:
    """Return a linear block's fields."""
    return {"key_heads": key_heads, "key_head_dim": key_head_dim, "value_heads": value_heads,
            "value_head_dim": value_head_dim, "conv": conv}


def mla(kv_lora_rank: int, rope_dim: int, nope_dim: int, v_head_dim: int, q_lora_rank: int = 0) -> dict[str, Any]:
    """Return an mla block's fields."""
    return {"kv_lora_rank": kv_lora_rank, "rope_dim": rope_dim, "nope_dim": nope_dim, "v_head_dim": v_head_dim,
            "q_lora_rank": q_lora_rank}
