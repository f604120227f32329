"""Rotary frequencies: what a layer turns its queries and keys by, for each rope_type transformers offers.

`frequencies` returns a layer's inverse frequencies (one per turned pair, the
pairs being rotate-half's (i, i + d/2) of the turned dims) and the scale on cos
and sin, re-expressed from transformers' modeling_rope_utils for the rope types
hpdsl builds (docs/torch.md#rotary-embeddings). The fields are the model's
(fields/model.hpf, "The rotary embedding"), mapped from a config's rope_scaling
or rope_parameters by profiles/default.hpf.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from hpdsl.errors import BuildError
from hpdsl.torch.modules.fused import rotate


class Rotary:
    """One layer's rotary embedding: its frequencies computed once per device (per length, for dynamic)."""

    def __init__(self, config: Any, dim: int, fraction: float = 1.0, *, sliding: bool = False) -> None:
        self.config, self.dim, self.fraction, self.sliding = config, dim, fraction, sliding
        self._cache: dict[tuple[str, int], tuple[Tensor, float]] = {}
        if config.rope and not config.no_rope and not config.alibi:  # a rope_type it cannot build fails now
            frequencies(config, dim, fraction, sliding=sliding)

    def __call__(self, x: Tensor, positions: Tensor) -> Tensor:
        """Turn `x` [batch, seq, heads, dim] at `positions` [seq]."""
        longest = 0
        if self.config.rope_type == "dynamic" and not (self.sliding and self.config.local_rope_unscaled):
            longest = int(positions.max()) + 1 if positions.numel() else 0  # a host sync, dynamic only
        key = (str(positions.device), longest)
        if key not in self._cache:
            inverse, scale = frequencies(self.config, self.dim, self.fraction, sliding=self.sliding,
                                         longest=longest)
            self._cache[key] = (inverse.to(positions.device), scale)
        inverse, scale = self._cache[key]
        return rotate(x, positions, inverse, scale)


def frequencies(config: Any, dim: int, fraction: float = 1.0, *, sliding: bool = False,
                longest: int = 0) -> tuple[Tensor, float]:
    """Return (inverse frequencies, cos/sin scale) of a `dim`-wide rotation turning `fraction` of it.

    `sliding` marks a sliding-window layer (its own base, and with
    local_rope_unscaled the default rope over all `dim`); `longest` is the
    sequence's last position + 1 (dynamic grows its base past max_positions).
    """
    theta = config.local_rope_theta if sliding and config.local_rope_theta else config.rope_theta
    unscaled = sliding and config.local_rope_unscaled
    kind = "default" if unscaled else config.rope_type
    fraction = 1.0 if unscaled else fraction
    if kind == "proportional":
        return _proportional(theta, dim, fraction, config.rope_factor), 1.0
    turned = int(dim * fraction)
    if kind == "longrope":
        raise BuildError("rope_type longrope (per-pair short and long factors) is not built by hpdsl's attention; "
                         "its cost is priced, but build it with transformers or state another rope_type")
    if kind == "dynamic":
        theta = _dynamic_base(config, theta, turned, longest)
    inverse = _exponents(theta, turned)
    if kind == "linear":
        return inverse / config.rope_factor, 1.0
    if kind == "llama3":
        return _llama3(config, inverse), 1.0
    if kind == "yarn":
        return _yarn(config, theta, turned)
    return inverse, 1.0


def query_scale(config: Any, positions: Tensor) -> Tensor:
    """Return Llama 4's query scale at `positions`: 1 + β·ln(1 + ⌊p / original positions⌋) (rope_query_beta β).

    Ministral 3 multiplies its rotated queries by it (transformers' get_llama_4_attn_scale): 1 within the
    context the frequencies were trained at, growing by β per doubling of the distance past it.
    """
    original = config.rope_original_positions or config.max_positions
    return 1 + config.rope_query_beta * torch.log(1 + torch.floor(positions.to(torch.float32) / original))


def nope_temperature(config: Any, positions: Tensor) -> Tensor:
    """Return Llama 4's no-position query scale at `positions`: 1 + τ·ln(1 + ⌊(p + 1) / floor⌋).

    τ is nope_temperature, floor nope_temperature_floor (transformers' attn_temperature_tuning,
    attn_scale and floor_scale): 1 up to position floor − 2, then growing as the context does.
    """
    steps = torch.floor((positions.to(torch.float32) + 1.0) / config.nope_temperature_floor)
    return torch.log1p(steps) * config.nope_temperature + 1.0


def deinterleaved(x: Tensor) -> Tensor:
    """Return x [..., d] with its interleaved pairs regrouped: evens, then odds (transformers' rope_interleave).

    Turning the regrouped dims by halves is turning the pairs (x0, x1), (x2, x3), ... as complex numbers;
    queries and keys regrouped alike keep every score.
    """
    return x.unflatten(-1, (-1, 2)).transpose(-1, -2).flatten(-2)


def _exponents(theta: float, dim: int, pairs: int | None = None) -> Tensor:
    """Return θ^(-2i/dim) for the first `pairs` pairs (all dim / 2 by default), in float32."""
    steps = torch.arange(0, 2 * (dim // 2 if pairs is None else pairs), 2, dtype=torch.int64).to(torch.float32)
    return 1.0 / (theta ** (steps / dim))


def original_positions(config: Any) -> int:
    """Return the context the frequencies were trained at: rope_original_positions, else max_positions."""
    return int(config.rope_original_positions or config.max_positions or 0)


def _proportional(theta: float, dim: int, fraction: float, factor: float) -> Tensor:
    """Gemma 4's proportional rope: fraction of the pairs turn (exponents over the whole head), the rest stay."""
    pairs = int(fraction * dim // 2)
    turning = _exponents(theta, dim, pairs)
    still = torch.zeros(dim // 2 - pairs, dtype=torch.float32)
    return torch.cat([turning, still]) / factor


def _dynamic_base(config: Any, theta: float, dim: int, longest: int) -> float:
    """Dynamic NTK: the base grows once the sequence passes max_positions (unchanged up to it)."""
    limit = int(config.max_positions or 0)
    if not limit or longest <= limit or dim <= 2:
        return theta
    factor = config.rope_factor
    return theta * ((factor * longest / limit) - (factor - 1)) ** (dim / (dim - 2))


def _llama3(config: Any, inverse: Tensor) -> Tensor:
    """Llama 3.1: long wavelengths divided by the factor, short ones kept, a smooth band between."""
    factor, low, high = config.rope_factor, config.rope_low_freq_factor, config.rope_high_freq_factor
    old = original_positions(config)
    wavelength = 2 * math.pi / inverse
    scaled = torch.where(wavelength > old / low, inverse / factor, inverse)
    smooth = (old / wavelength - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelength < old / high) * ~(wavelength > old / low)
    return torch.where(medium, smoothed, scaled)


def yarn_scale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction 0.1·mscale·ln(factor) + 1 (1 at factor ≤ 1)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn(config: Any, theta: float, dim: int) -> tuple[Tensor, float]:
    """YaRN (NTK-by-parts): fast pairs extrapolated, slow ones interpolated, a linear ramp between."""
    old = original_positions(config)
    factor = config.rope_factor
    scale = config.rope_attention_factor
    if not scale:
        mscale, all_dims = config.rope_mscale, config.rope_mscale_all_dim
        scale = yarn_scale(factor, mscale) / yarn_scale(factor, all_dims) if mscale and all_dims \
            else yarn_scale(factor)
    low, high = (_correction(config.rope_beta_fast or 32.0, dim, theta, old),
                 _correction(config.rope_beta_slow or 1.0, dim, theta, old))
    if config.rope_truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    base = theta ** (torch.arange(0, dim, 2).to(torch.float32) / dim)
    extrapolated = 1 - ramp
    inverse = (1.0 / (factor * base)) * (1 - extrapolated) + (1.0 / base) * extrapolated
    return inverse, float(scale)


def _correction(rotations: float, dim: int, theta: float, positions: int) -> float:
    """The dim at which a pair turns `rotations` times over `positions`."""
    return (dim * math.log(positions / (rotations * 2 * math.pi))) / (2 * math.log(theta))


__all__ = ["Rotary", "frequencies", "original_positions", "yarn_scale"]
