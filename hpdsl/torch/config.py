"""A bound layer config (hpdsl.cost.bind) and its model into the config reference modules build from.

The shapes come from the same bound LayerConfig the estimator prices, so a
built layer has exactly the parameters hpdsl.cost.params counts; the facts
the estimator does not need (activation, norm type, positions) come from the
model.
"""

from __future__ import annotations

import attrs

from hpdsl.cost.bind import LayerConfig
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
        )

    @property
    def q_head_dim(self) -> int:
        """Return MLA's query/key head dim (no-position part plus rotary part)."""
        return (self.nope_dim or self.head_dim) + self.rope_dim


__all__ = ["ModuleConfig"]
