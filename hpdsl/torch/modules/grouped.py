"""Grouped GEMM for the routed experts: every local expert's rows in one `torch._grouped_mm` call.

The rows arrive sorted by expert (blocks of `counts` rows); the offsets are the
counts' running sum, computed on the device, so a step has neither a Python loop
over the experts nor a host sync for their sizes. torch's grouped GEMM (CPU and
CUDA in torch 2.13) wants 16-byte-aligned strides and a contiguous output
gradient; where the operands do not qualify (a width not a multiple of 16 bytes,
fp64, a DTensor weight) `grouped_applies` says so and the caller runs the experts
one by one.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributed.tensor import DTensor

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _grouped_mm_flops(a_shape: torch.Size, b_shape: torch.Size, *args: object, **kwargs: object) -> int:
    """Return a grouped GEMM's FLOPs: 2·M·K·N summed over the groups, however the offsets cut them."""
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    groups = a_shape[0] if len(a_shape) == 3 and len(b_shape) == 3 else 1  # 3-D × 3-D: one GEMM a group
    return 2 * groups * m * k * n


def _count_grouped_mm() -> None:
    # torch 2.13's FlopCounterMode has no formula for aten._grouped_mm, so the experts' GEMMs would
    # count 0 and the built model's FLOPs fall short of the estimate (docs/validation.md measures with it).
    from torch.utils import flop_counter

    op = getattr(torch.ops.aten, "_grouped_mm", None)
    if op is not None and op not in flop_counter.flop_registry:
        flop_counter.register_flop_formula(op)(_grouped_mm_flops)


_count_grouped_mm()


def grouped_applies(rows: Tensor, *weights: Tensor) -> bool:
    """Return whether torch's grouped GEMM runs `rows` [t, h] against every [E, h, n] weight of `weights`."""
    if not hasattr(torch, "_grouped_mm") or rows.dtype not in _DTYPES or rows.shape[0] == 0:
        return False
    size = rows.element_size()
    for weight in weights:
        if isinstance(weight, DTensor) or weight.dtype != rows.dtype or weight.ndim != 3:
            return False
        if (weight.shape[1] * size) % 16 or (weight.shape[2] * size) % 16:
            return False
    return True


class _ContiguousGrad(torch.autograd.Function):
    """The identity whose backward makes the gradient contiguous (grouped GEMM's backward needs it)."""

    @staticmethod
    def forward(ctx: object, x: Tensor) -> Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: object, grad: Tensor) -> Tensor:
        return grad.contiguous()


def grouped_mm(rows: Tensor, weight: Tensor, offsets: Tensor) -> Tensor:
    """Return rows @ weight[e] for each expert e's block of rows (blocks ending at `offsets`, int32)."""
    out = torch._grouped_mm(rows.contiguous(), weight, offs=offsets)
    return _ContiguousGrad.apply(out)


def offsets_of(counts: Tensor) -> Tensor:
    """Return the grouped GEMM's offsets: the running sum of the per-expert row counts, int32, on their device."""
    return torch.cumsum(counts, 0).to(torch.int32)


def expert_of_rows(counts: Tensor, rows: int) -> Tensor:
    """Return each row's local expert index (rows in expert order), without a host sync."""
    experts = torch.arange(counts.shape[0], device=counts.device)
    return torch.repeat_interleave(experts, counts, output_size=rows)
