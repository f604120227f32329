"""Reference feed-forward blocks for the `mlp` family: gated (SwiGLU-style) and plain MLPs.

Gated: down(act(gate(x)) * up(x)), three matrices. Plain: down(act(up(x))), two.
Biases, when the model has them, sit on every projection (width each, h on down).
The activation keeps only its inputs for the backward, as a fused SwiGLU does.
"""

from __future__ import annotations

from torch import Tensor, nn

from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.mesh import ContextLike
from hpdsl.torch.modules.common import activate, activation, gated_unit
from hpdsl.torch.modules.fused import fused


class MLP(nn.Module):
    """A dense feed-forward block; gated or plain as its config (or its subclass) says."""

    gated: bool | None = None

    def __init__(self, config: ModuleConfig, *, context: ContextLike = None,
                 module_fqn: str = "") -> None:
        super().__init__()
        gated = config.gated if self.gated is None else self.gated
        h, width, bias = config.hidden, config.ffn_width, config.mlp_bias
        if width < 1:
            raise ValueError(f"a feed-forward block needs a positive width, found {width}")
        self.act = activation(config.activation)
        self.unit = gated_unit(config)
        self.gate_proj = nn.Linear(h, width, bias=bias) if gated else None
        self.up_proj = nn.Linear(h, width, bias=bias)
        self.down_proj = nn.Linear(width, h, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """Return the block's output for `x` [..., h]."""
        if self.gate_proj is None:
            return self.down_proj(activate(self.act, self.up_proj(x)))
        return self.down_proj(fused(self.unit, self.gate_proj(x), self.up_proj(x)))


class GatedMLP(MLP):
    """down(act(gate(x)) * up(x)): the `gated` variant (SwiGLU with silu)."""

    gated = True


class PlainMLP(MLP):
    """down(act(up(x))): the `plain` variant."""

    gated = False


__all__ = ["GatedMLP", "MLP", "PlainMLP"]
