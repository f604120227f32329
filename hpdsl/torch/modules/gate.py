"""Reference module for the `tanh_gate` family: a block's output scaled by tanh of one learnt scalar.

A `wiring gated` layer (Mllama's cross-attention layers) puts one after each
block, before the residual add: x + tanh(g)·block(norm(x)), as transformers'
MllamaCrossAttentionDecoderLayer applies cross_attn_attn_gate and cross_attn_mlp_gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from hpdsl.torch.config import ModuleConfig


class TanhGate(nn.Module):
    """Scale the input by tanh(weight), weight one scalar that starts at 0."""

    def __init__(self, config: ModuleConfig | None = None, *, context: Mapping[str, Any] | None = None,
                 module_fqn: str = "") -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Zero the gate: a fresh gated block adds nothing to the residual stream."""
        with torch.no_grad():
            self.weight.zero_()

    def forward(self, x: Tensor) -> Tensor:
        """Return x · tanh(weight)."""
        return x * torch.tanh(self.weight).to(x.dtype)


__all__ = ["TanhGate"]
