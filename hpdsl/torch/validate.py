"""`hpdsl train --validate`: the unsharded model in one process, the reference a parallel run is compared with.

Every rank builds the unsharded model from the seed and copies its weights into
its own shards (tp slices, its ep experts), so the parallel job starts from the
very weights one process would; step 0's gradients, gathered whole, are compared
with the unsharded model's on the whole batch, and rank 0 trains the reference
alone on the whole batches for its losses. Memory: the whole model on every
rank, so this is a check for small, scaled models.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn
from torch.distributed.tensor import DTensor, Shard

from hpdsl.torch.modules import ExpertParallelExperts
from hpdsl.torch.objective import batch, objective

LEARNING_RATE = 1e-3
"""The reference's default constant learning rate (the trainer's default --lr; --validate takes no schedule)."""


def reference_name(name: str) -> str:
    """Return the reference's name of a parameter: the last stage's copy of the embedding is the embedding."""
    return "embed." + name.removeprefix("embed_copy.") if name.startswith("embed_copy.") else name


def expert_parameters(model: nn.Module) -> dict[str, tuple[ExpertParallelExperts, str]]:
    """Return every expert-parallel parameter's name → (its module, its name there): they hold a part of the whole."""
    return {f"{path}.{name}": (module, name)
            for path, module in model.named_modules() if isinstance(module, ExpertParallelExperts)
            for name, _ in module.named_parameters(recurse=False)}


def load_reference(model: nn.Module, reference: nn.Module) -> None:
    """Copy the reference's weights into this rank's shards (tp slices, its experts and their etp slices)."""
    full = reference.state_dict()
    experts = expert_parameters(model)
    with torch.no_grad():
        for name, param in model.named_parameters():
            source = full[reference_name(name)]
            if name in experts:
                module, own = experts[name]
                source = module.shard_of(own, source)
            if isinstance(param, DTensor):
                (placement,) = param.placements
                if isinstance(placement, Shard):
                    source = source.chunk(param.device_mesh.size(), dim=placement.dim)[
                        param.device_mesh.get_local_rank()]
                param.to_local().copy_(source)
            else:
                param.copy_(source)


def train_reference(model: nn.Module, steps: int, seed: int, rows: int, seq: int, vocab: int,
                    depth: int = 0, device: torch.device | str = "cpu", clip: float | None = None,
                    lr: float = LEARNING_RATE) -> tuple[list[float], list[float]]:
    """Train the unsharded model alone on the whole batches at `lr` (its norm clipped to `clip`); return losses, norms."""
    from hpdsl.torch.optim import clip as clip_to

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses, norms = [], []
    for step in range(steps):
        ids, targets = (t.to(device) for t in batch(step, seed, rows, seq, vocab, depth))
        loss = objective(model(ids), targets)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norms.append(float(torch.nn.utils.get_total_norm(grads, 2.0, foreach=False).double()))
        if clip is not None:
            clip_to(model.parameters(), clip, norms[-1])
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, norms


def reference_grads(model: nn.Module, seed: int, rows: int, seq: int, vocab: int,
                    depth: int = 0, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Return the unsharded model's gradients after step 0's whole batch (its .grad left empty)."""
    ids, targets = (t.to(device) for t in batch(0, seed, rows, seq, vocab, depth))
    objective(model(ids), targets).backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


def grad_gap(model: nn.Module, reference: Mapping[str, torch.Tensor]) -> tuple[float, float]:
    """Return (max |gradient - reference gradient|, max |reference gradient|) over `model`'s parameters.

    A sharded gradient is gathered whole first (a collective over its mesh: every
    rank of the stage calls it, parameters in the same order); an ep rank's
    experts are compared with their rows of the reference (their etp slice of the width).
    """
    experts = expert_parameters(model)
    gap, scale = 0.0, 0.0
    for name, param in model.named_parameters():
        if param.grad is None:
            continue
        grad = param.grad.full_tensor() if isinstance(param.grad, DTensor) else param.grad
        ref = reference[reference_name(name)]
        if name in experts:
            module, own = experts[name]
            ref = module.shard_of(own, ref)
        if grad.shape != ref.shape:
            raise ValueError(f"{name}: gradient {tuple(grad.shape)} against the reference's {tuple(ref.shape)}")
        gap = worst(gap, (grad - ref).abs().max().item())
        scale = worst(scale, ref.abs().max().item())
    return gap, scale


def worst(*values: float) -> float:
    """Return the largest of `values`, NaN where any is NaN (Python's max keeps whichever NaN comes first)."""
    return math.nan if any(math.isnan(v) for v in values) else max(values)
