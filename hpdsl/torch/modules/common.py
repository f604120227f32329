"""Building blocks the reference modules share: norms, activations, rotary positions, attention math."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from hpdsl.errors import BuildError
from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.mesh import ContextLike, JobContext, JobMesh, job_context
from hpdsl.torch.modules.fused import fused, rotate


def norm_arguments(config: ModuleConfig | None, dim: int | None, eps: float | None,
                   bias: bool | None, defaults: tuple[float, bool]) -> tuple[int, float, bool]:
    """Return a norm's (dim, eps, bias): those given, else the config's (hidden, norm_eps, norm_bias).

    Without a config, `dim` is required and eps and bias fall back to `defaults`.
    """
    if config is None:
        if dim is None:
            raise TypeError("a norm needs `dim` or a `config`")
        return dim, defaults[0] if eps is None else eps, defaults[1] if bias is None else bias
    return (config.hidden if dim is None else dim, config.norm_eps if eps is None else eps,
            config.norm_bias if bias is None else bias)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dim, with an optional bias.

    Built as `RMSNorm(dim, eps, bias=...)`, or by the `norm` family from a
    config (`config=`: over `hidden`, with the model's eps and bias). `offset`
    (the config's norm_offset: Gemma) scales by (1 + w) in float32, w from zeros.
    """

    def __init__(self, dim: int | None = None, eps: float | None = None, *, bias: bool | None = None,
                 config: ModuleConfig | None = None, context: Mapping[str, Any] | None = None,
                 module_fqn: str = "", offset: bool | None = None) -> None:
        super().__init__()
        dim, self.eps, bias = norm_arguments(config, dim, eps, bias, (1e-6, False))
        self.offset = bool(getattr(config, "norm_offset", False)) if offset is None else offset
        self.weight = nn.Parameter(torch.empty(dim))
        self.bias = nn.Parameter(torch.empty(dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set the scale to one (the weight to ones, or zeros under offset) and the bias to zeros."""
        if self.offset:  # (1 + w): a unit scale is w = 0
            nn.init.zeros_(self.weight)
        else:
            nn.init.ones_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: Tensor) -> Tensor:
        """Normalise `x` in float32 and scale it; the backward keeps only `x` (as a fused kernel does)."""
        if self.bias is None:
            return fused(self.normalise, x, self.weight)
        return fused(self.normalise, x, self.weight, self.bias)

    def normalise(self, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """Return x·rsqrt(mean(x²) + eps)·weight (+ bias), computed in float32."""
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        # Gemma's (1 + w) multiplies in float32 and rounds once, after (transformers' Gemma2RMSNorm).
        out = (normed * (1.0 + weight.float())).to(x.dtype) if self.offset else normed.to(x.dtype) * weight
        return out if bias is None else out + bias


class LayerNorm(nn.LayerNorm):
    """torch's LayerNorm (weight, optional bias), also built by the `norm` family from a config.

    `LayerNorm(dim, eps, bias=...)` defaults as torch's does (eps 1e-5, a
    bias); from a config it normalises `hidden` with the model's eps and bias.
    """

    def __init__(self, dim: int | None = None, eps: float | None = None, *, bias: bool | None = None,
                 config: ModuleConfig | None = None, context: Mapping[str, Any] | None = None,
                 module_fqn: str = "") -> None:
        dim, eps, bias = norm_arguments(config, dim, eps, bias, (1e-5, True))
        super().__init__(dim, eps=eps, bias=bias)


def make_norm(config: ModuleConfig, dim: int) -> nn.Module:
    """Return the model's norm over `dim`: RMSNorm or LayerNorm, biased iff the model says so."""
    if config.norm == "layernorm":
        return nn.LayerNorm(dim, eps=config.norm_eps, bias=config.norm_bias)
    return RMSNorm(dim, config.norm_eps, bias=config.norm_bias, offset=bool(config.norm_offset))


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


def gated_unit(config: ModuleConfig | None) -> Callable[[Tensor, Tensor], Tensor]:
    """Return (gate, up) -> act(gate)·up as `config` states it: its activation, or glu_alpha's and glu_limit's.

    gpt-oss's experts (transformers' GptOssExperts._apply_gate) clamp the gate to at most
    glu_limit and the up to ±glu_limit, take gate·σ(glu_alpha·gate) and multiply it by up + 1; DeepSeek-V4's
    (glu_clamp) clamp them alike and take act(gate)·up.
    """
    act = activation(config.activation if config is not None else "silu")
    alpha = float(config.glu_alpha or 0.0) if config is not None else 0.0
    limit = float(config.glu_limit or 0.0) if config is not None else 0.0
    if limit < 0:
        raise BuildError(f"glu_limit {limit} would clamp the up to an empty range: state a positive limit "
                         "(gpt-oss's swiglu_limit is 7.0), or leave it unset for no clamp")
    clamp = float(getattr(config, "glu_clamp", None) or 0.0) if config is not None else 0.0
    if clamp:  # DeepSeek-V4's swiglu_limit: both clamped, no + 1 (DeepseekV4Experts._apply_gate, DeepseekV4MLP)
        return lambda gate, up: act(gate.clamp(max=clamp)) * up.clamp(min=-clamp, max=clamp)
    if not alpha and not limit:
        return lambda gate, up: act(gate) * up

    def unit(gate: Tensor, up: Tensor) -> Tensor:
        if limit:
            gate, up = gate.clamp(max=limit), up.clamp(min=-limit, max=limit) + 1
        return (gate * torch.sigmoid(alpha * gate) if alpha else act(gate)) * up
    return unit


def activate(act: Callable[[Tensor], Tensor], x: Tensor, up: Tensor | None = None) -> Tensor:
    """Return act(x), or act(x)·up when gated, keeping only the inputs for the backward (fused)."""
    if up is None:
        return fused(act, x)
    return fused(lambda gate, value: act(gate) * value, x, up)


def causal_mask(q_positions: Tensor, k_positions: Tensor) -> Tensor:
    """Return the boolean mask [q, k] letting each query see keys at or before its position."""
    return k_positions[None, :] <= q_positions[:, None]


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, *, backend: str = "sdpa",
           scale: float | None = None, causal: bool = False, sinks: Tensor | None = None,
           softcap: float = 0.0) -> Tensor:
    """Return attention of q [b, s, h, d] over k, v [b, t, h_kv, d]: grouped heads, SDPA or eager.

    `causal` lets query i see keys 0..i of an aligned sequence without a mask
    tensor (a materialised [s, t] mask is one more tensor the backward keeps).
    Keys and values stay h_kv heads wide: SDPA groups the query heads itself.
    `sinks` [h] adds one learned logit per head to each softmax that no value
    follows (gpt-oss); SDPA has no such input, so sinks run the eager path.
    `softcap` c > 0 soft-caps the scaled scores to c·tanh(score / c) before the
    mask (Gemma 2, as transformers' eager attention); SDPA has no such input either.
    """
    if causal and mask is not None:
        raise ValueError("attend takes a mask or causal=True, not both")
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if backend == "sdpa" and sinks is None and not softcap:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale,
                                             enable_gqa=q.shape[1] != k.shape[1])
    else:
        out = _eager_attention(q, k, v, mask, scale=scale, causal=causal, sinks=sinks, softcap=softcap)
    return out.transpose(1, 2)


def _eager_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, *, scale: float,
                     causal: bool, sinks: Tensor | None = None, softcap: float = 0.0) -> Tensor:
    """Return softmax(q·kᵀ·scale + mask)·v in float32 for q [b, h, s, d], k, v [b, h_kv, t, d].

    The numerical reference: it repeats the kv heads and keeps the whole score
    tensor, so what it saves for the backward is not what a training kernel keeps.
    """
    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = soft_cap((q.float() @ k.float().transpose(-1, -2)) * scale, softcap)
    if causal:
        mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    if sinks is not None:
        sink = sinks.float().view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
        return (torch.cat([scores, sink], -1).softmax(-1)[..., :-1] @ v.float()).to(q.dtype)
    return (scores.softmax(-1) @ v.float()).to(q.dtype)


def soft_cap(x: Tensor, cap: float) -> Tensor:
    """Return cap·tanh(x / cap), x itself where cap is 0 (no soft-capping)."""
    return torch.tanh(x / cap) * cap if cap else x


def core_attention(recompute: bool, fn: Callable[..., Tensor], *args: Any, **kwargs: Any) -> Tensor:
    """Return fn(*args, **kwargs), the core attention; under selective recompute rerun in the backward.

    Selective recompute is Megatron's (docs/cost-model.md): the scores, softmax
    and A·V run again from q, k, v (and the mask), which the checkpoint keeps
    (torch.utils.checkpoint, non-reentrant, saves its tensor arguments); what the
    kernel keeps beyond them (flash's row statistics, the math kernel's softmax
    and fp32 copies, eager's score tensors) is not kept. The projections, norms,
    rotations and the output projection keep what they keep without recompute.
    """
    if not recompute or not torch.is_grad_enabled():
        return fn(*args, **kwargs)
    out: Tensor = checkpoint(fn, *args, use_reentrant=False, **kwargs)
    return out


def banded_attention(q: Tensor, k: Tensor, v: Tensor, window: int, *, scale: float | None = None,
                     sinks: Tensor | None = None, softcap: float = 0.0) -> Tensor:
    """Return causal sliding-window attention of q [b, s, h, d] over aligned k, v [b, s, h_kv, d].

    Query i sees keys i − w + 1 .. i (transformers' sliding_window_overlay:
    kv_idx > q_idx − w). Only the band is computed: each query's scores and
    context run over exactly w keys (the first w − 1 queries' band padded with
    masked zeros), s·w per head instead of the s×s square, which is what
    docs/validation.md measures against the model convention's windowed count.
    """
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    seq, pad = q.shape[2], window - 1
    keys = F.pad(k.float(), (0, 0, pad, 0)).unfold(2, window, 1)    # [b, h, s, d, w]
    values = F.pad(v.float(), (0, 0, pad, 0)).unfold(2, window, 1)
    scores = soft_cap(torch.einsum("bhsd,bhsdw->bhsw", q.float(), keys) * scale, softcap)
    first = torch.arange(seq, device=q.device)[:, None] - pad
    valid = first + torch.arange(window, device=q.device)[None, :] >= 0  # the padding is no key
    scores = scores.masked_fill(~valid, float("-inf"))
    if sinks is not None:
        sink = sinks.float().view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
        probs = torch.cat([scores, sink], -1).softmax(-1)[..., :-1]
    else:
        probs = scores.softmax(-1)
    out = torch.einsum("bhsw,bhsdw->bhsd", probs, values)
    return out.to(q.dtype).transpose(1, 2)


def job_of(context: ContextLike, module_fqn: str) -> JobContext:
    """Return a module's build context as a JobContext (a mapping is validated; None: a one-process job)."""
    return job_context(None, context, where=module_fqn or "<root>")


def cp_mesh(context: ContextLike, module_fqn: str, what: str) -> tuple[int, JobMesh | None]:
    """Return a module's cp degree and the job's mesh; BuildError if cp > 1 without a mesh that has a 'cp' axis.

    `what` says what the module passes over the cp ranks, for the message.
    """
    job = job_of(context, module_fqn)
    cp = job.size("cp")
    if cp > 1 and (job.mesh is None or job.mesh.axis_mesh("cp") is None):
        raise BuildError(f"{module_fqn or '<root>'}: {what} over {cp} ranks needs the job's mesh with a 'cp' axis")
    return cp, job.mesh


def refuse_axis(job: JobContext, axis: str, what: str, module_fqn: str) -> None:
    """Raise BuildError if the job splits `axis`, which module `what` has no form for."""
    size = job.size(axis)
    if size > 1:
        raise BuildError(f"{module_fqn or '<root>'}: {what} has no {axis}-parallel form, "
                         f"but the job has {axis}={size}")



def alibi_slopes(heads: int) -> Tensor:
    """Return ALiBi's per-head slopes as transformers' build_alibi_tensor makes them (BLOOM).

    The geometric sequence 2^(-8i/n) for the largest power of two n ≤ heads, then
    the odd terms of the sequence for 2n for the heads beyond it.
    """
    closest = 2 ** math.floor(math.log2(heads))
    base = 2.0 ** (-(2.0 ** -(math.log2(closest) - 3)))
    slopes = [base ** i for i in range(1, closest + 1)]
    if closest != heads:
        extra = 2.0 ** (-(2.0 ** -(math.log2(2 * closest) - 3)))
        slopes += [extra ** i for i in range(1, 2 * (heads - closest), 2)]
    return torch.tensor(slopes, dtype=torch.float32)

__all__ = ["alibi_slopes", "LayerNorm", "RMSNorm", "activate", "activation", "attend", "causal_mask", "context_size", "cp_mesh",
           "job_of",
           "make_norm", "norm_arguments", "refuse_axis", "rotate"]
