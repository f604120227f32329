"""Building blocks the reference modules share: norms, activations, rotary positions, attention math."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hpdsl.errors import BuildError
from hpdsl.torch.config import ModuleConfig


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dim, with an optional bias."""

    def __init__(self, dim: int, eps: float = 1e-6, *, bias: bool = False) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(dim))
        self.bias = nn.Parameter(torch.empty(dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set the weight to ones and the bias to zeros."""
        nn.init.ones_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: Tensor) -> Tensor:
        """Normalise `x` in float32 and scale it."""
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        out = normed.to(x.dtype) * self.weight
        return out if self.bias is None else out + self.bias


LayerNorm = nn.LayerNorm
"""torch's LayerNorm (weight, optional bias) is the reference LayerNorm."""


def make_norm(config: ModuleConfig, dim: int) -> nn.Module:
    """Return the model's norm over `dim`: RMSNorm or LayerNorm, biased iff the model says so."""
    if config.norm == "layernorm":
        return nn.LayerNorm(dim, eps=config.norm_eps, bias=config.norm_bias)
    return RMSNorm(dim, config.norm_eps, bias=config.norm_bias)


_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "relu2": lambda x: F.relu(x).square(),
}


def activation(name: str) -> Callable[[Tensor], Tensor]:
    """Return the activation function `name` (silu, gelu, gelu_tanh, relu, relu2)."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise BuildError(f"unknown activation '{name}'; expected one of {sorted(_ACTIVATIONS)}") from None


def rotate(x: Tensor, positions: Tensor, theta: float) -> Tensor:
    """Apply rotary position embeddings to `x` [batch, seq, heads, dim] at `positions` [seq]."""
    dim = x.shape[-1]
    inverse = 1.0 / (theta ** (torch.arange(0, dim, 2, device=x.device, dtype=torch.float32) / dim))
    angles = positions.to(torch.float32)[:, None] * inverse[None, :]
    cos = torch.cat([angles.cos(), angles.cos()], -1)[None, :, None, :]
    sin = torch.cat([angles.sin(), angles.sin()], -1)[None, :, None, :]
    first, second = x.float().chunk(2, dim=-1)
    rotated = torch.cat([-second, first], dim=-1)
    return (x.float() * cos + rotated * sin).to(x.dtype)


def causal_mask(q_positions: Tensor, k_positions: Tensor) -> Tensor:
    """Return the boolean mask [q, k] letting each query see keys at or before its position."""
    return k_positions[None, :] <= q_positions[:, None]


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, *, backend: str = "sdpa",
           scale: float | None = None) -> Tensor:
    """Return attention of q [b, s, h, d] over k, v [b, t, h_kv, d]: grouped heads, SDPA or eager."""
    heads, kv_heads = q.shape[2], k.shape[2]
    if heads != kv_heads:
        k = k.repeat_interleave(heads // kv_heads, dim=2)
        v = v.repeat_interleave(heads // kv_heads, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if backend == "sdpa":
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    else:
        scores = (q.float() @ k.float().transpose(-1, -2)) * scale
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
        out = (scores.softmax(-1) @ v.float()).to(q.dtype)
    return out.transpose(1, 2)


def context_size(context: Any, axis: str) -> int:
    """Return the size of `axis` in a build context (1 without a context)."""
    return int(context.get(f"{axis}_size", 1)) if context else 1


def refuse_axis(context: Any, axis: str, what: str, module_fqn: str) -> None:
    """Raise BuildError if the job splits `axis`, which module `what` has no form for."""
    size = context_size(context, axis)
    if size > 1:
        raise BuildError(f"{module_fqn or '<root>'}: {what} has no {axis}-parallel form, "
                         f"but the job has {axis}={size}")


__all__ = ["LayerNorm", "RMSNorm", "activation", "attend", "causal_mask", "context_size", "make_norm",
           "refuse_axis", "rotate"]
