"""Differentiable collectives the parallel variants use: all-gather along a dim, all-to-all by splits,
an identity whose gradient is summed over a group (for parameters fed a tp shard of the activations),
and the point-to-point hand-offs of a sequence split over cp in order (rank r's chunk follows rank r−1's).

Written as autograd Functions over the plain c10d calls so they run on every
backend gloo included (gloo has no reduce-scatter: the all-gather's backward
sums the gradients with an all-reduce and keeps this rank's slice).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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


def _neighbours(group: ProcessGroup) -> tuple[int | None, int | None]:
    """Return the global ranks before and after this one in `group`'s order (None at either end)."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    before = dist.get_global_rank(group, rank - 1) if rank > 0 else None
    after = dist.get_global_rank(group, rank + 1) if rank < world - 1 else None
    return before, after


def _blank(like: Tensor) -> Tensor:
    """Return contiguous zeros shaped like `like` (a receive buffer must be contiguous; zeros_like keeps strides)."""
    return torch.zeros(like.shape, dtype=like.dtype, device=like.device)


def _exchange(send: Tensor | None, to: int | None, receive: Tensor, source: int | None,
              group: ProcessGroup) -> Tensor:
    """Send `send` to global rank `to` and receive into `receive` from `source` at once; return `receive`."""
    works = []
    if to is not None and send is not None:
        works.append(dist.isend(send.contiguous(), dst=to, group=group))
    if source is not None:
        works.append(dist.irecv(receive, src=source, group=group))
    for work in works:
        if work is not None:  # None only for a rank outside the group, which never calls this
            work.wait()
    return receive


class _ShiftForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, group: ProcessGroup) -> Tensor:
        """Send `x` to the next rank; return the previous rank's `x` (zeros on the first rank)."""
        ctx.group = group
        before, after = _neighbours(group)
        return _exchange(x, after, _blank(x), before, group)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        """Send the received tensor's gradient back to the previous rank; return the next rank's for `x`."""
        before, after = _neighbours(ctx.group)
        return _exchange(grad, before, _blank(grad), after, ctx.group), None


class _Receive(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, like: Tensor, group: ProcessGroup) -> Tensor:
        """Return the previous rank's tensor shaped like `like` (zeros on the first rank); blocks until it comes."""
        ctx.group = group
        before, _ = _neighbours(group)
        return _exchange(None, None, _blank(like), before, group)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, None]:
        """Send the gradient to the previous rank."""
        before, _ = _neighbours(ctx.group)
        _exchange(grad, before, grad, None, ctx.group)
        return None, None


class _HandOn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, out: Tensor, state: Tensor, group: ProcessGroup) -> Tensor:
        """Send `state` to the next rank; return `out` unchanged."""
        # The shape, not a zeros buffer: a buffer would sit beside the activations until the backward.
        ctx.group, ctx.like = group, (state.shape, state.dtype, state.device)
        _, after = _neighbours(group)
        _exchange(state, after, state, None, group)
        return out.view_as(out)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        """Pass `out`'s gradient through; receive `state`'s from the next rank (zeros on the last)."""
        _, after = _neighbours(ctx.group)
        shape, dtype, device = ctx.like
        blank = torch.zeros(shape, dtype=dtype, device=device)
        return grad, _exchange(None, None, blank, after, ctx.group), None


def sum_gradients(x: Tensor, group: ProcessGroup) -> Tensor:
    """Return `x` unchanged; in backward, sum its gradient over `group` (Megatron's copy-to-region)."""
    return _SumGradients.apply(x, group)


def gather_along(x: Tensor, group: ProcessGroup, dim: int) -> Tensor:
    """Return every rank's `x` concatenated along `dim` in rank order (equal shapes everywhere)."""
    return _GatherAlong.apply(x, group, dim)


def gather_sequence(group: ProcessGroup | None, k: Tensor, v: Tensor,
                    positions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Return keys and values (sequence on dim 1) and positions gathered over the cp `group` (as given without one)."""
    if group is None:
        return k, v, positions
    return gather_along(k, group, 1), gather_along(v, group, 1), gather_along(positions, group, 0)


def all_to_all(x: Tensor, send: list[int], receive: list[int], group: ProcessGroup) -> Tensor:
    """Send rows of `x` (split by `send`) to each rank; return the rows received (split by `receive`)."""
    return _AllToAll.apply(x, send, receive, group)


_RANK_LOCAL: ContextVar[bool] = ContextVar("hpdsl_rank_local", default=False)
"""True while a pass runs for shapes only (the hand-offs then move nothing)."""


@contextmanager
def rank_local() -> Iterator[None]:
    """Run the hand-offs below without communicating: for a pass whose values do not matter.

    torch.distributed.pipelining runs each stage once to infer shapes, and its
    backward there takes gradients only with respect to the stage's inputs, so a
    rank whose sends lie off that path would never send what its neighbour waits for.
    """
    token = _RANK_LOCAL.set(True)
    try:
        yield
    finally:
        _RANK_LOCAL.reset(token)


def shift_forward(x: Tensor, group: ProcessGroup) -> Tensor:
    """Return the previous rank's `x` in `group` (zeros on the first), sending this rank's to the next.

    Every rank sends and receives at once; the backward returns each gradient to its sender.
    """
    if _RANK_LOCAL.get():
        return x * 0
    return _ShiftForward.apply(x, group)


def receive_previous(like: Tensor, group: ProcessGroup) -> Tensor:
    """Return the tensor the previous rank in `group` hands on (`hand_on`), shaped like `like`; zeros on the first.

    Its gradient goes back to that rank in the backward.
    """
    if _RANK_LOCAL.get():
        return _blank(like)
    # A fresh leaf that requires grad: the received tensor then carries its gradient back.
    return _Receive.apply(like.detach().requires_grad_(torch.is_grad_enabled()), group)


def hand_on(out: Tensor, state: Tensor, group: ProcessGroup) -> Tensor:
    """Return `out` unchanged, sending `state` to the next rank in `group` (the last sends nothing).

    In the backward `state`'s gradient comes from that rank, once it has run its
    own backward (a chain from the last rank to the first): `out` must reach the loss.
    """
    if _RANK_LOCAL.get():
        return out
    return _HandOn.apply(out, state, group)


def exchange_counts(counts: Tensor, group: ProcessGroup) -> Tensor:
    """Return, per source rank, the counts it sends here: equal splits of `counts` over the group."""
    received = torch.empty_like(counts)
    dist.all_to_all_single(received, counts.contiguous(), group=group)
    return received


__all__ = ["all_to_all", "exchange_counts", "gather_along", "gather_sequence", "hand_on", "rank_local", "receive_previous",
           "shift_forward",
           "sum_gradients"]
