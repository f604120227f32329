"""One rank of `hpdsl train`: build the model for the strategy's mesh, parallelise it, train K steps, measure.

Run by `torch.distributed.run` (gloo on CPU) as
`python -m hpdsl.torch.train CONFIG.json OUT_DIR`; CONFIG holds the spec paths,
the model, the `--set` overrides, the strategy, the steps and the seed. Every
rank builds the unsharded reference from the seed and copies its weights into
its own shards (tp slices, its ep experts), so the parallel job starts from the
very weights one process would; FSDP2 then shards them. Each step draws a global
batch of synthetic tokens from the seed; a rank takes its data-parallel rows
and, under cp, its chunk of each sequence. It writes OUT_DIR/<rank>.json: the
step losses (averaged over the data-parallel ranks), the bytes of its parameter,
gradient and optimizer-state shards, and the peak bytes saved for backward
(saved_tensors_hooks); rank 0 also trains the reference alone, on the whole
batch, and writes its losses.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel import loss_parallel

from hpdsl.api import compile_paths
from hpdsl.cost.strategy import Strategy
from hpdsl.ir.nodes import ModelIR
from hpdsl.ir.overrides import apply_sets
from hpdsl.registry import Registry
from hpdsl.torch.mesh import JobMesh
from hpdsl.torch.model import build_model, materialize
from hpdsl.torch.modules import ExpertParallelExperts
from hpdsl.torch.parallelize import coordinates, data_rank, parallelize, train_mesh

LEARNING_RATE = 1e-3


def load_model(config: Mapping[str, Any]) -> tuple[ModelIR, Registry]:
    """Compile the config's spec paths and return its model (overrides applied) and the registry."""
    registry = compile_paths(config["paths"], stdlib=config.get("stdlib", True))
    name = config.get("model") or next(iter(registry.models))
    return apply_sets(registry.models[name], config.get("sets", {})), registry


def batch(step: int, seed: int, rows: int, seq: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the step's global batch of synthetic token ids and their next-token targets."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    tokens = torch.randint(0, vocab, (rows, seq + 1), generator=generator)
    return tokens[:, :-1], tokens[:, 1:]


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
    """Count the bytes autograd saves for backward inside the block (parameters excluded); yield [bytes]."""
    params = {(p.to_local() if isinstance(p, DTensor) else p).untyped_storage().data_ptr()
              for p in model.parameters()}
    seen: set[int] = set()
    total = [0]

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        if isinstance(tensor, nn.Parameter):
            return tensor
        storage = _plain(tensor).untyped_storage()
        if storage.data_ptr() not in params and storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total[0] += storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield total


def _plain(tensor: torch.Tensor) -> torch.Tensor:
    """Return the plain tensor holding `tensor`'s data (a DTensor's local shard, a pending collective's result)."""
    if isinstance(tensor, DTensor):
        tensor = tensor._local_tensor  # not to_local(): that would record an autograd op inside a pack hook
    if isinstance(tensor, AsyncCollectiveTensor):
        tensor = tensor.elem
    return tensor


def load_reference(model: nn.Module, reference: nn.Module) -> None:
    """Copy the reference's weights into this rank's shards (tp slices, its experts)."""
    full = reference.state_dict()
    experts = {f"{path}.{name}": (module.first, module.local)
               for path, module in model.named_modules() if isinstance(module, ExpertParallelExperts)
               for name, _ in module.named_parameters(recurse=False)}
    with torch.no_grad():
        for name, param in model.named_parameters():
            source = full[name]
            if name in experts:
                first, count = experts[name]
                source = source[first:first + count]
            if isinstance(param, DTensor):
                (placement,) = param.placements
                if isinstance(placement, Shard):
                    source = source.chunk(param.device_mesh.size(), dim=placement.dim)[
                        param.device_mesh.get_local_rank()]
                param.to_local().copy_(source)
            else:
                param.copy_(source)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Return the mean next-token loss of logits [b, s, vocab] (a DTensor split over the vocabulary under tp).

    Split logits need torch's loss_parallel() around this call and the backward.
    """
    return F.cross_entropy(logits.flatten(0, 1), targets.reshape(-1))


def train_reference(model: nn.Module, steps: int, seed: int, rows: int, seq: int, vocab: int) -> list[float]:
    """Train the unsharded model alone on the whole batches; return its step losses."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    losses = []
    for step in range(steps):
        ids, targets = batch(step, seed, rows, seq, vocab)
        loss = cross_entropy(model(ids), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def run(config: Mapping[str, Any], out_dir: Path) -> None:
    """Train this rank's share and write OUT_DIR/<rank>.json."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    strategy = Strategy(**{**config["strategy"], "pp_split": None})
    model_ir, registry = load_model(config)
    seed, steps, seq, vocab = config["seed"], config["steps"], strategy.seq_len, model_ir.vocab
    mesh = train_mesh(strategy)
    reference = materialize(build_model(model_ir, registry=registry), "cpu", seed=seed)
    model = materialize(build_model(model_ir, JobMesh(mesh), registry=registry), "cpu", seed=seed)
    load_reference(model, reference)
    parallelize(model, strategy, mesh, reshard_params=registry.profile(model_ir.profile).run.reshard_params)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    where, groups = data_rank(mesh)
    cp, cps = coordinates(mesh)["cp"], strategy.cp
    rows = strategy.micro_batch * groups
    measured: dict[str, int] = {"params_bytes": local_bytes(model.parameters())}
    losses = []
    for step in range(steps):
        ids, targets = batch(step, seed, rows, seq, vocab)
        part = (slice(where * strategy.micro_batch, (where + 1) * strategy.micro_batch),
                slice(cp * seq // cps, (cp + 1) * seq // cps))
        with saved_activations(model) as saved:
            logits = model(ids[part])
        with loss_parallel():  # logits split over the vocabulary (tp): the loss and its backward run split
            loss = cross_entropy(logits, targets[part])
            loss.backward()
        if step == 0:
            measured["grads_bytes"] = local_bytes(p.grad for p in model.parameters() if p.grad is not None)
            measured["activation_peak_bytes"] = saved[0]
        optimizer.step()
        optimizer.zero_grad()
        if step == 0:
            measured["optimizer_bytes"] = optimizer_bytes(optimizer)
        whole = loss.full_tensor() if isinstance(loss, DTensor) else loss
        mean = whole.detach().clone() / dist.get_world_size()  # tp ranks share data: their losses agree
        dist.all_reduce(mean)
        losses.append(mean.item())
    out: dict[str, Any] = {"rank": rank, "coords": coordinates(mesh), "loss": losses, "measured": measured}
    if rank == 0:
        out["reference_loss"] = train_reference(reference, steps, seed, rows, seq, vocab)
    (out_dir / f"{rank}.json").write_text(json.dumps(out), encoding="utf-8")
    dist.destroy_process_group()


def main(argv: list[str]) -> int:
    """Entry point of `python -m hpdsl.torch.train CONFIG.json OUT_DIR`."""
    config = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    run(config, Path(argv[1]))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main(sys.argv[1:]))
