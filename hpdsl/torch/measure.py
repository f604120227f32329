"""What `hpdsl train` measures on a rank: the bytes of its shards, the activations autograd saves, held gradients.

Each number is the one the estimator prices per rank (docs/cost-model.md):
parameter, gradient and optimizer-state bytes of this rank's shards, the peak
bytes saved for backward (saved_tensors_hooks, parameters excluded) and, between
micro-batches, the gradients FSDP2 holds unsharded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

from hpdsl.torch.modules.fused import recomputing


def local_bytes(tensors: Iterator[torch.Tensor]) -> int:
    """Return the bytes this rank holds of `tensors` (a DTensor's local shard)."""
    total = 0
    for tensor in tensors:
        local = tensor.to_local() if isinstance(tensor, DTensor) else tensor
        total += local.numel() * local.element_size()
    return total


def optimizer_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Return the bytes of the optimizer's per-parameter state tensors (AdamW's moments; not its step count)."""
    return local_bytes(value for state in optimizer.state.values() for key, value in state.items()
                       if key != "step" and isinstance(value, torch.Tensor))


@contextmanager
def saved_activations(model: nn.Module) -> Iterator[list[int]]:
    """Count the bytes autograd saves for backward inside the block (parameters, gathered or not, excluded); yield [bytes]."""
    seen: set[int] = set()
    total = [0]

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        if isinstance(tensor, nn.Parameter) or recomputing():  # a fused kernel's backward workspace
            return tensor
        storage = _plain(tensor).untyped_storage()
        if storage.data_ptr() not in param_storages(model) and storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total[0] += storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield total


def param_storages(model: nn.Module) -> set[int]:
    """Return the addresses of the storages `model`'s parameters hold now.

    Read at each saved tensor, not once: inside FSDP2's forward a module's
    parameters are the gathered (unsharded) ones, allocated before its forward
    and freed after when it reshards, and what autograd saves of them (a weight,
    its transpose, an expert's slice) is a parameter, not an activation.
    """
    return {_plain(param).untyped_storage().data_ptr() for param in model.parameters()}


def _plain(tensor: torch.Tensor) -> torch.Tensor:
    """Return the plain tensor holding `tensor`'s data (a DTensor's local shard, a pending collective's result)."""
    if isinstance(tensor, DTensor):
        tensor = tensor._local_tensor  # not to_local(): that would record an autograd op inside a pack hook
    if isinstance(tensor, AsyncCollectiveTensor):
        tensor = tensor.elem
    return tensor


class _Saved:
    """One tensor autograd saved for backward; tells the tracker when autograd lets it go."""

    __slots__ = ("tensor", "key", "release")

    def __init__(self, tensor: torch.Tensor, key: int, release: Callable[[int], None]) -> None:
        self.tensor, self.key, self.release = tensor, key, release

    def __del__(self) -> None:
        self.release(self.key)


@contextmanager
def saved_activation_peak(model: nn.Module) -> Iterator[list[int]]:
    """Track the bytes autograd holds for backward inside the block (parameters excluded); yield [peak bytes].

    A pipeline step interleaves micro-batches' forwards and backwards, so what is
    saved is also freed during the step: each storage counts from the first
    tensor saved on it until autograd drops the last one, and the peak of the sum
    is what the rank held at its fullest (the estimator's in-flight micro-batches).
    What a fused function's backward saves while it recomputes (hpdsl/torch/modules/fused.py
    `recomputing`) is the kernel's workspace, not counted.
    """
    holders: dict[int, int] = {}
    sizes: dict[int, int] = {}
    live_peak = [0, 0]

    def release(key: int) -> None:
        holders[key] -= 1
        if not holders[key]:
            del holders[key]
            live_peak[0] -= sizes.pop(key)

    def pack(tensor: torch.Tensor) -> Any:
        if isinstance(tensor, nn.Parameter) or recomputing():  # a fused kernel's backward workspace
            return tensor
        storage = _plain(tensor).untyped_storage()
        key = storage.data_ptr()
        if key in param_storages(model):
            return tensor
        if key not in holders:
            holders[key], sizes[key] = 0, storage.nbytes()
            live_peak[0] += sizes[key]
            live_peak[1] = max(live_peak)
        holders[key] += 1
        return _Saved(tensor, key, release)

    def unpack(saved: Any) -> torch.Tensor:
        return saved.tensor if isinstance(saved, _Saved) else saved

    peak = [0]
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield peak
    peak[0] = live_peak[1]


def held_grad_bytes(model: nn.Module) -> int:
    """Return the gradient bytes this rank holds now: its sharded `.grad`s and FSDP2's unsharded ones.

    Between micro-batches without gradient sync FSDP2 keeps each parameter's
    unsharded gradient on its unsharded parameter (private state: FSDP2 has no
    public accessor for it), to reduce-scatter after the last micro-batch.
    """
    total = local_bytes(p.grad for p in model.parameters() if p.grad is not None)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            for group in module._get_fsdp_state()._fsdp_param_groups:
                for param in group.fsdp_params:
                    unsharded = getattr(param, "_unsharded_param", None)
                    for grad in (None if unsharded is None else unsharded.grad, param.unsharded_accumulated_grad):
                        total += 0 if grad is None else local_bytes(iter([grad]))
    return total


def shard_like_params(model: nn.Module) -> None:
    """Give every DTensor gradient its parameter's placements (in place of the whole tensor).

    Summing micro-batches' gradients of a vocabulary-split table can leave the
    sum replicated (a Shard and a Partial contribution add up to Replicate); the
    values are right, but each rank would hold the whole gradient.
    """
    for param in model.parameters():
        grad = param.grad
        if isinstance(param, DTensor) and isinstance(grad, DTensor) and grad.placements != param.placements:
            param.grad = grad.redistribute(param.device_mesh, param.placements)
