"""Reference gated short convolution for the `short_conv` family (families/short_conv.hpf).

Parameter names and shapes follow Transformers' Lfm2ShortConv: in_proj (hidden →
3·hidden: B, C and x), a depthwise causal conv of ssm_conv taps over B·x, and
out_proj (hidden → hidden) of C times the convolution's output; ssm_conv_bias
puts a bias on all three. The convolution pads on the left only, so it computes
one output per token, as Transformers' causal_conv1d_fn keeps.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.mesh import ContextLike
from hpdsl.torch.modules.common import job_of, refuse_axis


class ShortConv(nn.Module):
    """LFM2's gated short convolution: (C ⊙ conv(B ⊙ x)) projected back to hidden."""

    def __init__(self, config: ModuleConfig, *, layer_index: int = 0, context: ContextLike = None,
                 module_fqn: str = "") -> None:
        super().__init__()
        refuse_axis(job_of(context, module_fqn), "cp", type(self).__name__, module_fqn)
        h, taps, bias = config.hidden, config.ssm_conv, config.ssm_conv_bias
        if taps < 1:
            raise ValueError("a short convolution needs ssm_conv ≥ 1 taps")
        self.layer_index = layer_index
        self.in_proj = nn.Linear(h, 3 * h, bias=bias)
        self.conv = nn.Conv1d(h, h, taps, groups=h, bias=bias)
        self.out_proj = nn.Linear(h, h, bias=bias)

    def forward(self, x: Tensor, *, positions: Tensor | None = None, bias: Tensor | None = None,
                memory: Tensor | None = None) -> Tensor:
        """Mix `x` [b, s, h] causally through the gated convolution; return [b, s, h]."""
        b, c, stream = self.in_proj(x).transpose(1, 2).chunk(3, dim=1)  # each [b, h, s]
        kernel = self.conv.weight.shape[-1]
        mixed = self.conv(F.pad(b * stream, (kernel - 1, 0)))
        return self.out_proj((c * mixed).transpose(1, 2))


__all__ = ["ShortConv"]
