"""One rank of `hpdsl train`: build the model for the strategy's mesh, parallelise it, train K steps, measure.

Run by `torch.distributed.run` (gloo on CPU) as
`python -m hpdsl.torch.train CONFIG.json OUT_DIR`; CONFIG holds the spec paths,
the model, the `--set` overrides, the strategy, the steps and the seed. Every
rank builds the unsharded reference from the seed and copies its weights into
its own shards (tp slices, its ep experts), so the parallel job starts from the
very weights one process would; FSDP2 then shards them. Each step draws a global
batch of synthetic tokens from the seed; a rank takes its data-parallel rows
and, under cp, its chunk of each sequence (a model's MTP layers train too, with
their loss: hpdsl/torch/objective.py). It writes OUT_DIR/<rank>.json: the
step losses (averaged over the data-parallel ranks), the bytes of its parameter,
gradient and optimizer-state shards, the peak bytes saved for backward
(saved_tensors_hooks) and how far its gradients after step 0 are from the
unsharded model's on the whole batch; rank 0 also trains the reference alone, on the whole
batch, and writes its losses.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel import loss_parallel

from hpdsl.api import compile_paths
from hpdsl.ir.nodes import ModelIR
from hpdsl.ir.overrides import apply_sets
from hpdsl.model.strategy import Strategy
from hpdsl.registry import Registry
from hpdsl.torch.mesh import JobMesh
from hpdsl.torch.model import build_model, materialize
from hpdsl.torch.modules import ExpertParallelExperts
from hpdsl.torch.modules.fused import recomputing
from hpdsl.torch.objective import batch, mtp_depth, objective, rank_batch
from hpdsl.torch.parallelize import coordinates, data_rank, gradient_sync, parallelize, stage_mesh, train_mesh
from hpdsl.torch.pipeline import embedding_group, run_step, schedule, split_model, sum_embedding_grads

LEARNING_RATE = 1e-3


def load_model(config: Mapping[str, Any]) -> tuple[ModelIR, Registry]:
    """Compile the config's spec paths and return its model (overrides applied) and the registry."""
    registry = compile_paths(config["paths"], stdlib=config.get("stdlib", True))
    name = config.get("model") or next(iter(registry.models))
    return apply_sets(registry.models[name], config.get("sets", {})), registry


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
                    depth: int = 0) -> list[float]:
    """Train the unsharded model alone on the whole batches; return its step losses."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    losses = []
    for step in range(steps):
        ids, targets = batch(step, seed, rows, seq, vocab, depth)
        loss = objective(model(ids), targets)
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
    split = config["strategy"].get("pp_split")
    strategy = Strategy(**{**config["strategy"], "pp_split": None if split is None else tuple(split)})
    model_ir, registry = load_model(config)
    facts = registry.profile(model_ir.profile).run
    if strategy.sequence_parallel is None:  # unstated: the profile's run fact, as the estimator reads it
        strategy = strategy.with_(sequence_parallel=facts.shard_activations)
    seed, steps, seq, vocab = config["seed"], config["steps"], strategy.seq_len, model_ir.vocab
    depth = mtp_depth(model_ir)
    mesh = train_mesh(strategy)
    if strategy.pp > 1:
        staged = train_pipelined(model_ir, registry, strategy, mesh, seed, steps)
        (out_dir / f"{rank}.json").write_text(json.dumps(staged), encoding="utf-8")
        dist.destroy_process_group()
        return
    reference = materialize(build_model(model_ir, registry=registry, include_mtp=True), "cpu", seed=seed)
    model = materialize(build_model(model_ir, JobMesh(mesh), registry=registry, include_mtp=True), "cpu", seed=seed)
    load_reference(model, reference)
    parallelize(model, strategy, mesh, reshard_params=facts.reshard_params)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    where, groups = data_rank(mesh)
    cp, cps, micro = coordinates(mesh)["cp"], strategy.cp, strategy.micro_batches
    share = strategy.micro_batch * micro  # this data-parallel rank's rows per step, in `micro` micro-batches
    rows = share * groups
    expected = reference_grads(reference, seed, rows, seq, vocab, depth)
    measured: dict[str, Any] = {"params_bytes": local_bytes(model.parameters())}
    losses = []
    positions = slice(cp * seq // cps, (cp + 1) * seq // cps)
    for step in range(steps):
        held, total = [0], torch.zeros(())
        # One batch: what its forward saves (its backward saves nothing). Several: every micro-batch's
        # saved activations counted while autograd holds them, the step's peak.
        with (saved_activation_peak(model) if micro > 1 else saved_activations(model)) as saved:
            for index in range(micro):
                first = where * share + index * strategy.micro_batch
                ids, targets = rank_batch(step, seed, rows, seq, vocab, depth,
                                          (slice(first, first + strategy.micro_batch), positions))
                loss = accumulate(model, ids, targets, index, micro, defer=facts.deferred_grad_accumulation)
                total = total + (loss.full_tensor() if isinstance(loss, DTensor) else loss).detach()
                if step == 0 and index == 0 and micro > 1:
                    held[0] = held_grad_bytes(model)
        if step == 0:
            measured["grads_bytes"] = local_bytes(p.grad for p in model.parameters() if p.grad is not None)
            measured["activation_peak_bytes"] = saved[0]
            measured["grad_max_diff"], measured["grad_max_abs"] = grad_gap(model, expected)
            if micro > 1:
                measured["held_grads_bytes"] = held[0]
        optimizer.step()
        optimizer.zero_grad()
        if step == 0:
            measured["optimizer_bytes"] = optimizer_bytes(optimizer)
        mean = total / (micro * dist.get_world_size())  # tp ranks share data: their losses agree
        dist.all_reduce(mean)
        losses.append(mean.item())
    out: dict[str, Any] = {"rank": rank, "coords": coordinates(mesh), "loss": losses, "measured": measured}
    if rank == 0:
        out["reference_loss"] = train_reference(reference, steps, seed, rows, seq, vocab, depth)
    (out_dir / f"{rank}.json").write_text(json.dumps(out), encoding="utf-8")
    dist.destroy_process_group()


def accumulate(model: nn.Module, ids: torch.Tensor, targets: torch.Tensor, index: int, micro: int, *,
               defer: bool) -> torch.Tensor:
    """Run micro-batch `index` of `micro` forward and backward (gradients add up); return its loss.

    Its loss is divided by `micro` before the backward, so the step's summed gradient
    is the one of the mean loss over the whole batch (every micro-batch has as many
    tokens). With `defer` (the profile's deferred_grad_accumulation) FSDP2 reduces
    no gradient before the last micro-batch (`set_requires_gradient_sync(False)`,
    holding them unsharded); otherwise it reduce-scatters each micro-batch's into
    the sharded gradients.
    """
    if micro > 1:
        gradient_sync(model, not defer or index == micro - 1)
    # The loss's saved softmax is an activation the estimator prices (the logits term): counted too.
    with loss_parallel():  # logits split over the vocabulary (tp): the loss and its backward run split
        loss = objective(model(ids), targets)
        (loss / micro if micro > 1 else loss).backward()
    return loss


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


def reference_grads(model: nn.Module, seed: int, rows: int, seq: int, vocab: int,
                    depth: int = 0) -> dict[str, torch.Tensor]:
    """Return the unsharded model's gradients after step 0's whole batch (its .grad left empty)."""
    ids, targets = batch(0, seed, rows, seq, vocab, depth)
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
        gap = max(gap, (grad - ref).abs().max().item())
        scale = max(scale, ref.abs().max().item())
    return gap, scale


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


def train_pipelined(model_ir: ModelIR, registry: Registry, strategy: Strategy, mesh: DeviceMesh,
                    seed: int, steps: int) -> dict[str, Any]:
    """Train this rank's pipeline chunks (torch.distributed.pipelining) K steps; return its measurements."""
    seq, vocab, coords = strategy.seq_len, model_ir.vocab, coordinates(mesh)
    stage = stage_mesh(mesh)
    depth = mtp_depth(model_ir)
    reference = materialize(build_model(model_ir, registry=registry, include_mtp=True), "cpu", seed=seed)
    chunks = split_model(build_model(model_ir, JobMesh(stage), registry=registry, include_mtp=True), strategy,
                         coords["pp"])
    tables = embedding_group(mesh) if depth or model_ir.tie_embeddings else None
    for chunk in chunks.values():
        materialize(chunk, "cpu")
        load_reference(chunk, reference)
        parallelize(chunk, strategy, stage)
    held = nn.ModuleList(chunks.values())
    optimizer = torch.optim.AdamW(held.parameters(), lr=LEARNING_RATE)

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        # Split over the vocabulary under tp (run_step runs in loss_parallel); the schedule sums plain losses.
        loss = objective(logits, target)
        return loss.to_local() if isinstance(loss, DTensor) else loss  # replicated: every tp rank's is whole

    runner = schedule(chunks, strategy, mesh["pp"].get_group(), loss_fn, torch.device("cpu"))
    where, groups = data_rank(mesh)
    share = strategy.micro_batch * strategy.micro_batches  # this data-parallel rank's rows per step
    rows, cp, cps = share * groups, coords["cp"], strategy.cp
    expected = reference_grads(reference, seed, rows, seq, vocab, depth)
    measured: dict[str, Any] = {"params_bytes": local_bytes(held.parameters())}
    losses = []
    part = (slice(where * share, (where + 1) * share), slice(cp * seq // cps, (cp + 1) * seq // cps))
    for step in range(steps):
        ids, targets = rank_batch(step, seed, rows, seq, vocab, depth, part)
        with saved_activation_peak(held) as saved, loss_parallel():  # the loss's forward and backward
            micro = run_step(runner, chunks, strategy, ids, targets)
        shard_like_params(held)
        if tables is not None:
            sum_embedding_grads(chunks, tables)
        if step == min(1, steps - 1):
            # Step 0 also runs torch.distributed.pipelining's one-off metadata inference, a real forward
            # whose graph stage 0 keeps beside its in-flight micro-batches: the peak of a steady step is step 1's.
            measured["activation_peak_bytes"] = saved[0]
        if step == 0:
            measured["grads_bytes"] = local_bytes(p.grad for p in held.parameters() if p.grad is not None)
            gaps = [grad_gap(chunk, expected) for chunk in chunks.values()]  # chunks keep the model's names
            measured["grad_max_diff"] = max(gap for gap, _ in gaps)
            measured["grad_max_abs"] = max(scale for _, scale in gaps)
        optimizer.step()
        optimizer.zero_grad()
        if step == 0:
            measured["optimizer_bytes"] = optimizer_bytes(optimizer)
        # The last stage's dp·cp·tp ranks hold the loss (tp ranks agree); the others add nothing.
        mean = torch.stack(micro).mean().detach() if micro else torch.zeros(())
        mean = mean * strategy.pp / dist.get_world_size()
        dist.all_reduce(mean)
        losses.append(mean.item())
    out: dict[str, Any] = {"rank": dist.get_rank(), "coords": coords, "loss": losses, "measured": measured}
    if dist.get_rank() == 0:
        out["reference_loss"] = train_reference(reference, steps, seed, rows, seq, vocab, depth)
    return out


def main(argv: list[str]) -> int:
    """Entry point of `python -m hpdsl.torch.train CONFIG.json OUT_DIR`."""
    config = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    run(config, Path(argv[1]))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main(sys.argv[1:]))
