"""Differentiable collectives the parallel variants use: all-gather along a dim, all-to-all by splits,
and an identity whose gradient is summed over a group (for parameters fed a tp shard of the activations).

Written as autograd Functions over the plain c10d calls so they run on every
backend gloo included (gloo has no reduce-scatter: the all-gather's backward
sums the gradients with an all-reduce and keeps this rank's slice).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed import ProcessGroup


class _GatherAlong(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, group: ProcessGroup, dim: int) -> Tensor:
        """Gather every rank's `x` along `dim`."""
        world = dist.get_world_size(group)
        ctx.group, ctx.dim, ctx.world, ctx.rank = group, dim, world, dist.get_rank(group)
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=dim)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        """Sum the gradients of every rank's copy and keep this rank's slice."""
        total = grad.contiguous().clone()
        dist.all_reduce(total, group=ctx.group)
        return total.chunk(ctx.world, dim=ctx.dim)[ctx.rank].contiguous(), None, None


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, send: list[int], receive: list[int], group: ProcessGroup) -> Tensor:
        """Exchange rows: `send[r]` rows go to rank r, `receive[r]` rows come from it."""
        ctx.send, ctx.receive, ctx.group = send, receive, group
        out = x.new_empty((sum(receive), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), receive, send, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        """Send the gradients back the way the rows came."""
        out = grad.new_empty((sum(ctx.send), *grad.shape[1:]))
        dist.all_to_all_single(out, grad.contiguous(), ctx.send, ctx.receive, group=ctx.group)
        return out, None, None, None


class _SumGradients(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, group: ProcessGroup) -> Tensor:
        """Return `x` unchanged."""
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        """Sum the gradient over the group."""
        total = grad.contiguous().clone()
        dist.all_reduce(total, group=ctx.group)
        return total, None


def sum_gradients(x: Tensor, group: ProcessGroup) -> Tensor:
    """Return `x` unchanged; in backward, sum its gradient over `group` (Megatron's copy-to-region)."""
    return _SumGradients.apply(x, group)


def gather_along(x: Tensor, group: ProcessGroup, dim: int) -> Tensor:
    """Return every rank's `x` concatenated along `dim` in rank order (equal shapes everywhere)."""
    return _GatherAlong.apply(x, group, dim)


def all_to_all(x: Tensor, send: list[int], receive: list[int], group: ProcessGroup) -> Tensor:
    """Send rows of `x` (split by `send`) to each rank; return the rows received (split by `receive`)."""
    return _AllToAll.apply(x, send, receive, group)


def exchange_counts(counts: Tensor, group: ProcessGroup) -> Tensor:
    """Return, per source rank, the counts it sends here: equal splits of `counts` over the group."""
    received = torch.empty_like(counts)
    dist.all_to_all_single(received, counts.contiguous(), group=group)
    return received


__all__ = ["all_to_all", "exchange_counts", "gather_along", "sum_gradients"]
