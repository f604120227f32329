"""Reference module for the `relative_position_bias` family: T5's bucketed relative position bias.

One learnt scalar per bucket and head, added to the attention scores of every
layer of its tower; transformers keeps the table on the first layer of each
stack (T5Attention's has_relative_attention_bias), hpdsl on the tower, built
through the family's layout like every slot (families/relative_position_bias.hpf).
An encoder's buckets are bidirectional (its layers are not causal), a decoder's
look back only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from hpdsl.torch.config import ModuleConfig

MAX_DISTANCE = 128
"""transformers' relative_attention_max_distance default: offsets beyond it share the last bucket."""


class RelativePositionBias(nn.Module):
    """T5's bucketed relative position bias: one learnt scalar per bucket and head."""

    def __init__(self, config: ModuleConfig, *, context: Mapping[str, Any] | None = None,
                 module_fqn: str = "") -> None:
        super().__init__()
        self.buckets, self.max_distance = int(config.position_buckets), MAX_DISTANCE
        self.bidirectional = not config.causal
        self.embedding = nn.Embedding(self.buckets, int(config.heads))

    def forward(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """Return the additive bias [1, heads, q, k]."""
        relative = k_positions[None, :] - q_positions[:, None]
        return self.embedding(self._bucket(relative)).permute(2, 0, 1).unsqueeze(0)

    def _bucket(self, relative: Tensor) -> Tensor:
        buckets, result = self.buckets, torch.zeros_like(relative)
        if self.bidirectional:
            buckets //= 2
            result = result + (relative > 0).long() * buckets
            distance = relative.abs()
        else:
            distance = -torch.clamp(relative, max=0)
        exact = buckets // 2
        scaled = torch.log(distance.float().clamp(min=1) / exact) / math.log(self.max_distance / exact)
        far = torch.clamp(exact + (scaled * (buckets - exact)).long(), max=buckets - 1)
        return result + torch.where(distance < exact, distance, far)


__all__ = ["MAX_DISTANCE", "RelativePositionBias"]
