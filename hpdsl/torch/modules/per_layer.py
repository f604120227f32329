"""Reference module for the `per_layer_input` family: a layer's per-layer input block (Gemma 4's PLE).

After the layer's feed-forward, transformers' Gemma4TextDecoderLayer runs the hidden
states through per_layer_input_gate (hidden → per_layer_width) and the model's
activation, multiplies them by the layer's own per-layer input and projects them back
to hidden (per_layer_projection); the layer's per_layer_post_norm and the residual add
follow (hpdsl/torch/layers.py `DecoderLayer`). The per-layer inputs are the model's
(hpdsl/torch/layers.py `CausalLM.per_layer_inputs`).
"""

from __future__ import annotations

from torch import Tensor, nn

from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.mesh import ContextLike
from hpdsl.torch.modules.common import activate, activation


class PerLayerInput(nn.Module):
    """per_layer_projection(act(per_layer_input_gate(x)) · per_layer), no biases (the `gated` variant)."""

    def __init__(self, config: ModuleConfig, *, context: ContextLike = None, module_fqn: str = "") -> None:
        super().__init__()
        width = int(config.per_layer_width)
        if width < 1:
            raise ValueError(f"a per-layer input block needs a positive per_layer_width, found {width}")
        self.act = activation(config.activation)
        self.per_layer_input_gate = nn.Linear(config.hidden, width, bias=False)
        self.per_layer_projection = nn.Linear(width, config.hidden, bias=False)

    def forward(self, x: Tensor, per_layer: Tensor) -> Tensor:
        """Return the block's output for `x` [..., h] and this layer's per-layer input [..., per_layer_width]."""
        return self.per_layer_projection(activate(self.act, self.per_layer_input_gate(x), per_layer))


__all__ = ["PerLayerInput"]
