"""Autograd functions that keep for the backward only what a fused kernel keeps.

Written op by op, a module saves every intermediate autograd needs: an RMSNorm
its normalised input, a SwiGLU its activation's output, a short convolution its
pre-activation output, the chunked delta rule every chunk's WY factors. Fused
kernels (Apex/Transformer Engine norms, Megatron's swiglu, causal-conv1d, FLA's
chunked gated delta rule) keep their inputs and recompute the rest in the
backward, and that is what hpdsl's estimator prices (docs/cost-model.md,
docs/validation.md). `fused(fn, *inputs)` does the same for any function of
tensors: it saves `inputs` and nothing else and reruns `fn` under autograd in
the backward. `rotate` keeps not even its input: the backward of a rotation is
the inverse rotation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor


_RECOMPUTING = [0]
"""How many _Fused backwards are rerunning their function now (the tracker in hpdsl/torch/train.py reads it)."""


def recomputing() -> bool:
    """Return whether a fused function's backward is recomputing it: what it saves is the kernel's workspace.

    A fused kernel recomputes inside its backward without autograd; this module
    reruns `fn` under autograd instead, so the tensors that rerun saves are the
    stand-in for the kernel's own workspace, not activations kept for the backward.
    """
    return _RECOMPUTING[0] > 0


class _Fused(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, fn: Callable[..., Any], *inputs: Tensor) -> Any:
        """Run `fn` (autograd is off in a Function's forward) and keep only its inputs."""
        ctx.fn = fn
        ctx.save_for_backward(*inputs)
        return fn(*inputs)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple[Tensor | None, ...]:
        """Recompute `fn` from the saved inputs under autograd and return its input gradients."""
        needs = ctx.needs_input_grad[1:]
        inputs = tuple(t.detach().requires_grad_(need) for t, need in zip(ctx.saved_tensors, needs))
        _RECOMPUTING[0] += 1
        try:
            with torch.enable_grad():
                out = ctx.fn(*inputs)
            outs = out if isinstance(out, tuple) else (out,)
            wanted = [t for t in inputs if t.requires_grad]
            found = iter(torch.autograd.grad(outs, wanted, grads, allow_unused=True) if wanted else ())
        finally:
            _RECOMPUTING[0] -= 1
        return (None, *(next(found) if t.requires_grad else None for t in inputs))


def fused(fn: Callable[..., Tensor], *inputs: Tensor) -> Tensor:
    """Return fn(*inputs), saving only `inputs` for the backward (the rest is recomputed there)."""
    out: Tensor = _Fused.apply(fn, *inputs)
    return out


def fused_pair(fn: Callable[..., tuple[Tensor, Tensor]], *inputs: Tensor) -> tuple[Tensor, Tensor]:
    """Return fn(*inputs), a pair of tensors, saving only `inputs` for the backward, as `fused` does."""
    first, second = _Fused.apply(fn, *inputs)
    return first, second


def _rotated(x: Tensor, positions: Tensor, inverse: Tensor, scale: float) -> Tensor:
    """Return `x` [batch, seq, heads, dim] turned by position·frequency, cos and sin times `scale` (float32 math).

    A negative `scale` turns back: the transpose of the map, which the backward applies to the gradient.
    """
    angles = positions.to(torch.float32)[:, None] * inverse.to(x.device)[None, :]
    cos = abs(scale) * torch.cat([angles.cos(), angles.cos()], -1)[None, :, None, :]
    sin = scale * torch.cat([angles.sin(), angles.sin()], -1)[None, :, None, :]
    first, second = x.float().chunk(2, dim=-1)
    rotated = torch.cat([-second, first], dim=-1)
    return (x.float() * cos + rotated * sin).to(x.dtype)


class _Rotation(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, positions: Tensor, inverse: Tensor, scale: float) -> Tensor:
        """Rotate `x`, keeping only the positions and the frequencies."""
        ctx.save_for_backward(positions, inverse)
        ctx.scale = scale
        return _rotated(x, positions, inverse, scale)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        """Turn the gradient back: the map is a scaled rotation, its transpose the scaled inverse rotation."""
        positions, inverse = ctx.saved_tensors
        return _rotated(grad, positions, inverse, -ctx.scale), None, None, None


def rotate(x: Tensor, positions: Tensor, inverse: Tensor, scale: float = 1.0) -> Tensor:
    """Apply rotary position embeddings to `x` [batch, seq, heads, dim] at `positions` [seq].

    `inverse` holds one frequency per turned pair (hpdsl/torch/modules/rope.py): the
    first 2·len(inverse) dims of each head turn, rotate-half style, and the others
    pass through unchanged (partial rotary, transformers' Phi); cos and sin are
    scaled by `scale` (YaRN's attention factor).
    """
    dims = 2 * inverse.shape[0]
    if dims >= x.shape[-1]:
        return _Rotation.apply(x, positions, inverse, scale)
    turned, kept = x[..., :dims], x[..., dims:]
    return torch.cat([_Rotation.apply(turned, positions, inverse, scale), kept], dim=-1)


__all__ = ["fused", "fused_pair", "rotate"]
