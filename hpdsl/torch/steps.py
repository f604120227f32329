"""What one rank of `hpdsl train` runs each step: a whole model (micro-batches accumulated) or its pipeline chunks.

`build_job` builds the rank's part of the model for the strategy's mesh, on
the meta device materialised shard by shard (hpdsl/torch/init.py), or, with
`validate`, from the unsharded reference's weights (hpdsl/torch/validate.py),
and returns a `Job`: its step (forward and backward on this rank's share of the
batch, returning its part of the mean loss, summed over the ranks by the
caller) and the measurements the estimator prices, taken at the first step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

from hpdsl.model.strategy import Strategy
from hpdsl.ir.nodes import ModelIR
from hpdsl.registry import Registry
from hpdsl.torch import optim
from hpdsl.torch.data import Tokens
from hpdsl.torch.init import shard_init
from hpdsl.torch.measure import (held_grad_bytes, local_bytes, optimizer_bytes, saved_activation_peak,
                                 saved_activations, shard_like_params)
from hpdsl.torch.mesh import JobMesh
from hpdsl.torch.model import build_model, materialize
from hpdsl.torch.modules import ExpertParallelExperts
from hpdsl.torch.objective import mtp_depth, objective
from hpdsl.torch.parallelize import coordinates, data_rank, gradient_sync, parallelize, stage_mesh, train_mesh
from hpdsl.torch.pipeline import embedding_group, run_step, split_model, sum_embedding_grads
from hpdsl.torch.validate import grad_gap, load_reference, reference_grads, train_reference, worst


class Job:
    """This rank's part of the model, its step, and what it measured."""

    def __init__(self, module: nn.Module, coords: dict[str, int], step: Callable[[int], torch.Tensor], *,
                 pp_group: dist.ProcessGroup | None = None, mesh: DeviceMesh | None = None) -> None:
        self.module, self.coords, self._step, self.pp_group = module, coords, step, pp_group
        # The ep·etp experts: each rank of the (ep, etp) group holds other parts (their norms add over it).
        self.parts = {id(p) for m in module.modules() if isinstance(m, ExpertParallelExperts) for p in m.parameters()}
        split = mesh is not None and mesh["ep"].size() * mesh["etp"].size() > 1
        self.parts_group = mesh["ep", "etp"]._flatten("norm_parts").get_group() if split and mesh else None
        self.measured: dict[str, Any] = {"params_bytes": local_bytes(module.parameters())}
        self.expected: Mapping[str, torch.Tensor] | None = None  # the reference's step-0 gradients (validate)
        # Trains the reference alone (rank 0, validate): its losses and gradient norms.
        self.reference: Callable[[], tuple[list[float], list[float]]] | None = None
        self.gap_parts: list[nn.Module] = [module]

    def params(self) -> Iterator[nn.Parameter]:
        """Return this rank's parameters."""
        return self.module.parameters()

    def grad_norm(self) -> float:
        """Return the global gradient norm over every rank's parameters (hpdsl/torch/optim.py)."""
        return optim.grad_norm(self.params(), self.pp_group, self.parts, self.parts_group)

    def step(self, step: int) -> torch.Tensor:
        """Run step `step`'s forward and backward; return this rank's part of the mean loss."""
        return self._step(step)

    def measure_grads(self) -> None:
        """Record the gradient bytes of the first step (and, with validate, the gap to the reference's)."""
        self.measured["grads_bytes"] = local_bytes(p.grad for p in self.params() if p.grad is not None)
        if self.expected is not None:
            gaps = [grad_gap(part, self.expected) for part in self.gap_parts]
            self.measured["grad_max_diff"] = worst(*(gap for gap, _ in gaps))
            self.measured["grad_max_abs"] = worst(*(scale for _, scale in gaps))

    def measure_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Record the optimizer-state bytes after the first step."""
        self.measured["optimizer_bytes"] = optimizer_bytes(optimizer)


@contextmanager
def unmeasured() -> Iterator[list[int]]:
    """Run the block without counting its saved activations; yield [0] as the counters do."""
    yield [0]


def build_job(model_ir: ModelIR, registry: Registry, strategy: Strategy, config: Mapping[str, Any],
              device: torch.device, tokens: Tokens) -> Job:
    """Build this rank's job for the strategy on `device` (pipelined when pp > 1)."""
    mesh = train_mesh(strategy, device.type)
    if strategy.pp > 1:
        return _pipelined(model_ir, registry, strategy, config, mesh, device, tokens)
    return _whole(model_ir, registry, strategy, config, mesh, device, tokens)


def _reference(model_ir: ModelIR, registry: Registry, device: torch.device, seed: int) -> nn.Module:
    return materialize(build_model(model_ir, registry=registry, include_mtp=True), device, seed=seed)


def _whole(model_ir: ModelIR, registry: Registry, strategy: Strategy, config: Mapping[str, Any],
           mesh: DeviceMesh, device: torch.device, tokens: Tokens) -> Job:
    seed, validate = int(config["seed"]), bool(config.get("validate"))
    facts = registry.profile(model_ir.profile).run
    coords = coordinates(mesh)
    model = build_model(model_ir, JobMesh(mesh), registry=registry, include_mtp=True)
    reference, init = None, None
    if validate:
        reference = _reference(model_ir, registry, device, seed)
        load_reference(materialize(model, device, seed=seed), reference)
    else:
        init = shard_init(model, device, seed, coords)
    parallelize(model, strategy, mesh, reshard_params=facts.reshard_params, init=init)
    seq, depth, micro = strategy.seq_len, mtp_depth(model_ir), strategy.micro_batches
    where, groups = data_rank(mesh)
    share = strategy.micro_batch * micro  # this data-parallel rank's rows per step, in `micro` micro-batches
    rows = share * groups
    positions = slice(coords["cp"] * seq // strategy.cp, (coords["cp"] + 1) * seq // strategy.cp)
    world = dist.get_world_size()

    def step(index: int) -> torch.Tensor:
        held, total = [0], torch.zeros((), device=device)
        # One batch: what its forward saves (its backward saves nothing). Several: every micro-batch's
        # saved activations counted while autograd holds them, the step's peak. Only the first step is
        # measured: the hooks run Python at every saved tensor, host time a training step does not spend.
        measuring = "activation_peak_bytes" not in job.measured
        counter = saved_activation_peak(model) if micro > 1 else saved_activations(model)
        with counter if measuring else unmeasured() as saved:
            for part in range(micro):
                first = where * share + part * strategy.micro_batch
                ids, targets = (t.to(device) for t in tokens.rank_batch(
                    index, rows, seq, depth, (slice(first, first + strategy.micro_batch), positions)))
                loss = accumulate(model, ids, targets, part, micro, defer=facts.deferred_grad_accumulation)
                # A vocabulary-split table's gradient comes back whole (DTensor's embedding backward
                # replicates it): each rank keeps its own rows, as the estimate prices them.
                shard_like_params(model)
                total = total + (loss.full_tensor() if isinstance(loss, DTensor) else loss).detach()
                if part == 0 and micro > 1 and "held_grads_bytes" not in job.measured:
                    held[0] = held_grad_bytes(model)
        if measuring:
            job.measured["activation_peak_bytes"] = saved[0]
            if micro > 1:
                job.measured["held_grads_bytes"] = held[0]
        return total / (micro * world)  # tp ranks share data: their losses agree

    job = Job(model, coords, step, mesh=mesh)
    if init is not None:
        job.measured["materialize_peak_bytes"] = init.peak_bytes
    if reference is not None:
        _check_against(job, reference, model_ir.vocab, config, seed, rows, seq, depth, device)
    return job


def _check_against(job: Job, reference: nn.Module, vocab: int, config: Mapping[str, Any], seed: int, rows: int,
                   seq: int, depth: int, device: torch.device) -> None:
    """Give `job` the whole reference model's gradients and training run to be compared with."""
    job.expected = reference_grads(reference, seed, rows, seq, vocab, depth, device)
    job.reference = lambda: train_reference(reference, int(config["steps"]), seed, rows, seq, vocab, depth, device,
                                            config["optim"].get("clip"), float(config["optim"]["lr"]))


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


def _pipelined(model_ir: ModelIR, registry: Registry, strategy: Strategy, config: Mapping[str, Any],
               mesh: DeviceMesh, device: torch.device, tokens: Tokens) -> Job:
    """Return this rank's pipeline chunks (torch.distributed.pipelining) as a job."""
    from hpdsl.torch.pipeline_stage import schedule  # torch.distributed.pipelining: only a pp > 1 run loads it

    seed, validate = int(config["seed"]), bool(config.get("validate"))
    seq, coords, stage = strategy.seq_len, coordinates(mesh), stage_mesh(mesh)
    depth = mtp_depth(model_ir)
    reference = _reference(model_ir, registry, device, seed) if validate else None
    chunks = split_model(build_model(model_ir, JobMesh(stage), registry=registry, include_mtp=True), strategy,
                         coords["pp"])
    tables = embedding_group(mesh) if depth or model_ir.tie_embeddings else None
    peak = 0
    for chunk in chunks.values():
        init = None
        if reference is not None:
            materialize(chunk, device)
            load_reference(chunk, reference)
        else:
            init = shard_init(chunk, device, seed, coords)
        parallelize(chunk, strategy, stage, init=init)
        peak += 0 if init is None else init.peak_bytes
    held = nn.ModuleList(chunks.values())

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        # Split over the vocabulary under tp (run_step runs in loss_parallel); the schedule sums plain losses.
        loss = objective(logits, target)
        return loss.to_local() if isinstance(loss, DTensor) else loss  # replicated: every tp rank's is whole

    runner = schedule(chunks, strategy, mesh["pp"].get_group(), loss_fn, device)
    where, groups = data_rank(mesh)
    share = strategy.micro_batch * strategy.micro_batches  # this data-parallel rank's rows per step
    rows, cp, cps = share * groups, coords["cp"], strategy.cp
    part = (slice(where * share, (where + 1) * share), slice(cp * seq // cps, (cp + 1) * seq // cps))
    ran = [0]

    def step(index: int) -> torch.Tensor:
        ids, targets = (t.to(device) for t in tokens.rank_batch(index, rows, seq, depth, part))
        counter = saved_activation_peak(held) if ran[0] <= 1 else unmeasured()  # measured in the first two steps
        with counter as saved, loss_parallel():  # the loss's forward and backward
            micro = run_step(runner, chunks, strategy, ids, targets)
        shard_like_params(held)
        if tables is not None:
            sum_embedding_grads(chunks, tables)
        # The first step also runs torch.distributed.pipelining's one-off metadata inference, a real forward
        # whose graph stage 0 keeps beside its in-flight micro-batches: the peak of a steady step is the second's.
        if ran[0] <= 1:
            job.measured["activation_peak_bytes"] = saved[0]
        ran[0] += 1
        # The last stage's dp·cp·tp ranks hold the loss (tp ranks agree); the others add nothing.
        mean = torch.stack(micro).mean().detach() if micro else torch.zeros((), device=device)
        return mean * strategy.pp / dist.get_world_size()

    job = Job(held, coords, step, pp_group=mesh["pp"].get_group(), mesh=mesh)
    if reference is None:
        job.measured["materialize_peak_bytes"] = peak
    job.gap_parts = list(chunks.values())  # chunks keep the model's names
    if reference is not None:
        _check_against(job, reference, model_ir.vocab, config, seed, rows, seq, depth, device)
    return job
