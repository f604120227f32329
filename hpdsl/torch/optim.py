"""AdamW, its learning-rate schedule and gradient clipping over every mesh the backend builds.

`torch.nn.utils.clip_grad_norm_` stacks every gradient's norm, which fails
when a model holds plain tensors beside DTensors (tp: "mixed torch.Tensor and
DTensor") or DTensors of different meshes (dp·ep: the experts shard over
dp·cp·tp/ep·etp, the dense parameters over dp·ep·etp·cp: "must have the same
mesh"). `grad_norm` groups the gradients by mesh and placements, takes each
group's norm (a DTensor norm is reduced over its mesh by full_tensor), adds the
squares, sums the squares of the expert-parallel parts over the ep·etp ranks
that hold the other parts, and under pp sums them over the stages; every rank gets the same
global norm, and `clip` scales every gradient by one factor, as torchtitan's
EP-aware clipping does.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor


def optimizer(params: Iterable[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """Return AdamW over `params` at learning rate `lr` (torch's defaults otherwise)."""
    return torch.optim.AdamW(params, lr=lr)


def lr_factor(step: int, steps: int, warmup: int, schedule: str) -> float:
    """Return the learning rate of step `step` as a fraction of the peak: linear warmup, then the decay to 0."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, steps - warmup)
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0 - progress


def scheduler(opt: torch.optim.Optimizer, optim: Mapping[str, Any], steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Return the LambdaLR that runs `optim`'s warmup and schedule over `steps` steps."""
    warmup, kind = int(optim["warmup"]), str(optim["schedule"])
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, steps, warmup, kind))


def grad_norm(params: Iterable[nn.Parameter], pp_group: dist.ProcessGroup | None = None,
              parts: Collection[int] = (), parts_group: dist.ProcessGroup | None = None) -> float:
    """Return the global L2 norm of the gradients of `params`, whatever meshes they are on.

    `parts` are the ids of the parameters each rank of `parts_group` holds a
    different part of (the ep·etp experts: hpdsl/torch/modules/experts.py
    `ExpertParallelExperts`); their squares are summed over that group.
    """
    groups: dict[Any, list[torch.Tensor]] = {}
    for param in params:
        grad = param.grad
        if grad is None:
            continue
        mesh = (id(grad.device_mesh), grad.placements) if isinstance(grad, DTensor) else None
        groups.setdefault((id(param) in parts, mesh), []).append(grad)
    squares = {False: torch.zeros((), dtype=torch.float64), True: torch.zeros((), dtype=torch.float64)}
    for (split, _), grads in groups.items():
        norm = torch.nn.utils.get_total_norm(grads, 2.0, foreach=False)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        squares[split] += norm.detach().double().cpu() ** 2
    device = next((g[0].device for g in groups.values()), torch.device("cpu"))
    total = squares[False] + _summed(squares[True], parts_group, device)
    return float(_summed(total, pp_group, device).sqrt())


def _summed(value: torch.Tensor, group: dist.ProcessGroup | None, device: torch.device) -> torch.Tensor:
    """Return `value` summed over `group`'s ranks (itself without a group of several), on the CPU."""
    if group is None or dist.get_world_size(group) == 1:
        return value
    total = value.to(device)
    dist.all_reduce(total, group=group)
    return total.cpu()


def clip(params: Iterable[nn.Parameter], max_norm: float, norm: float) -> None:
    """Scale every gradient of `params` so that their global norm `norm` is at most `max_norm`."""
    factor = max_norm / (norm + 1e-6)
    if factor >= 1.0:
        return
    with torch.no_grad():
        for param in params:
            if param.grad is not None:
                param.grad.mul_(factor)
