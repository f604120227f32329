"""A built causal model cut into pipeline chunks where the estimator cuts it, run by torch.distributed.pipelining.

The body's layers are cut into pp·vpp chunks in model order, as
hpdsl/cost/price/pipeline_layout.py prices them: the strategy's `pp_split` when stated, else
its `even_split`; chunk c runs on pipeline rank c mod pp (Megatron's
interleaving, which is also how PyTorch's interleaved schedule places stages).
The embedding (and a learned position table) rides on the first chunk, the
final norm and the output head on the last, with the MTP layers and a copy of
the embedding for their lookups and a tied head, as the estimator prices them (hpdsl/torch/train.py
sums the two tables' gradients over the first and last stages). Each chunk is a `StageChunk` built
from the model's own modules (no tracing), so its parameters keep the model's
names (`layers.5.mixer...`) and a rank holds only its chunks' parameters.
`Schedule1F1B` runs one chunk per rank, `ScheduleInterleaved1F1B` several
(vpp > 1); both split the rank's batch into the strategy's micro-batches and
scale the gradients by their count, so a step's gradients are the mean over the
whole batch, as on one process.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed import ProcessGroup
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor

from hpdsl.bound.outer import stated_outer
from hpdsl.cost.price.pipeline_layout import even_split
from hpdsl.errors import BuildError
from hpdsl.ir.nodes import ModelIR
from hpdsl.model.strategy import Strategy
from hpdsl.torch.layers import CausalLM, output_logits

if TYPE_CHECKING:
    # torch.distributed.pipelining is imported by hpdsl/torch/pipeline_stage.py only, when a pp > 1 run needs it.
    from torch.distributed.pipelining.schedules import _PipelineSchedule

LossFn = Callable[[Tensor, Tensor], Tensor]


def chunk_spans(layers: int, strategy: Strategy) -> tuple[range, ...]:
    """Return the body layers each of the pp·vpp chunks holds, in model order (the estimator's cut)."""
    chunks = strategy.pp * strategy.vpp
    sizes = tuple(strategy.pp_split) if strategy.pp_split is not None else even_split(layers, chunks)
    if len(sizes) != chunks or sum(sizes) != layers:
        raise BuildError(f"pp_split {list(sizes)} must give {chunks} chunks (pp·vpp) summing to the "
                         f"{layers} body layers")
    starts = [sum(sizes[:c]) for c in range(chunks)]
    return tuple(range(start, start + size) for start, size in zip(starts, sizes))


def rank_chunks(strategy: Strategy, pp_rank: int) -> tuple[int, ...]:
    """Return the chunk indices pipeline rank `pp_rank` runs (c mod pp = pp_rank)."""
    return tuple(range(pp_rank, strategy.pp * strategy.vpp, strategy.pp))


def model_refusals(model: ModelIR) -> tuple[str, ...]:
    """Return why this backend cannot cut `model` into pipeline stages (empty: it can)."""
    reasons = []
    if {"encoder", "decoder"} <= {g.kind for g in model.groups}:
        reasons.append(f"{model.name} is an encoder-decoder: pipeline stages are cut for causal models only")
    if model.position_buckets:
        reasons.append(f"{model.name} has a relative position bias shared by every layer: not cut into stages")
    outer = stated_outer(model)
    if outer:
        reasons.append(f"{model.name} states the outer wiring {outer} (docs/language.md, \"The model's outer "
                       "wiring\"), which pipeline stages do not carry yet: use pp = 1")
    return tuple(reasons)


class StageChunk(nn.Module):
    """One pipeline chunk: some body layers, with the embedding (first chunk) or norm and head (last)."""

    def __init__(self, model: CausalLM, span: range, *, first: bool, last: bool) -> None:
        super().__init__()
        self.embed = model.embed if first else None
        self.mtp = model.mtp if last else None
        # The last stage looks up the MTP layers' shifted ids in its own copy of the table, and a tied
        # head multiplies by it (sum_embedding_grads keeps the copies equal).
        copied = last and not first and (model.mtp is not None or model.head is None)
        self.embed_copy = copy.deepcopy(model.embed) if copied else None
        self.mtp_ids: tuple[Tensor, ...] = ()  # the step's micro-batches' ids [b, s, 1 + D] (run_step sets them)
        self.micro_batch = 0  # the micro-batch being run (_Stage sets it)
        self.positions = model.positions if first else None
        # Keyed by the model's layer index: the chunk's parameter names are the model's.
        self.layers = nn.ModuleDict({str(i): model.layers[i] for i in span})
        self.norm = model.norm if last else None
        self.head = model.head if last else None
        self.cp_rank = model.cp_rank
        self.logit_softcap = model.logit_softcap
        self.sequence_shards = 1  # tp under sequence parallelism: a later chunk receives its sequence chunk

    def forward(self, x: Tensor) -> Tensor:
        """Return the chunk's output: hidden states [b, s, h], or the logits on the last chunk."""
        seq = x.shape[1] if self.embed is not None else x.shape[1] * self.sequence_shards
        positions = self.cp_rank * seq + torch.arange(seq, device=x.device)
        if self.embed is not None:
            x = self.embed(x)
            if self.positions is not None:
                x = x + self.positions(positions)
        for layer in self.layers.values():
            x = layer(x, positions=positions)
        if self.norm is None:
            return x
        # The embedding or its copy: the last chunk holds one where a tied head or MTP reads it.
        table = self.embed_copy if self.embed_copy is not None else self.embed
        logits = output_logits(self.norm(x), self.head, table, softcap=self.logit_softcap)
        if self.mtp is None:
            return logits
        ids = self.mtp_ids[self.micro_batch]
        assert table is not None
        every = [logits]
        for depth, mtp in enumerate(self.mtp, start=1):
            x = mtp(x, table(ids[..., depth]), positions=positions)
            every.append(output_logits(x, self.head, table, softcap=self.logit_softcap))
        return torch.cat(every, dim=1)


def split_model(model: nn.Module, strategy: Strategy, pp_rank: int) -> dict[int, StageChunk]:
    """Return this pipeline rank's chunks of a built causal model, by chunk index."""
    if not isinstance(model, CausalLM):
        raise BuildError(f"pipeline stages are cut from a causal model, not {type(model).__name__}")
    if model.position_bias is not None:
        raise BuildError("pipeline stages are not cut for a relative position bias yet")
    spans = chunk_spans(len(model.layers), strategy)
    last = len(spans) - 1
    return {c: StageChunk(model, spans[c], first=c == 0, last=c == last) for c in rank_chunks(strategy, pp_rank)}


def run_step(runner: _PipelineSchedule, chunks: dict[int, StageChunk], strategy: Strategy,
             ids: Tensor, targets: Tensor) -> list[Tensor]:
    """Run one step (forward and backward of every micro-batch); return the last chunk's micro-batch losses.

    With MTP layers `ids` and `targets` are [b, s, 1 + D] (hpdsl/torch/objective.py):
    the first chunk takes ids[..., 0], the last holds each micro-batch's ids
    for its MTP lookups (split as the schedule splits the batch), as Megatron's
    last stage reads its own copy of the batch.
    """
    last = strategy.pp * strategy.vpp - 1
    losses: list[Tensor] = []
    if ids.ndim == 3:
        if last in chunks:
            chunks[last].mtp_ids = torch.tensor_split(ids, strategy.micro_batches, dim=0)
        ids = ids[..., 0]
    args: Sequence[Tensor] = (ids,) if 0 in chunks else ()
    if last in chunks:
        runner.step(*args, target=targets, losses=losses)
    else:
        runner.step(*args)
    return losses


def embedding_group(mesh: DeviceMesh) -> ProcessGroup | None:
    """Return the group of this rank's first- and last-stage ranks at its (dp, ep, cp, tp) place (None: neither).

    Every rank creates every such group, in the same order, as new_group requires.
    """
    grid = mesh.mesh.reshape(mesh["pp"].size(), -1)
    mine = None
    for column in range(grid.shape[1]):
        ranks = sorted({int(grid[0, column]), int(grid[-1, column])})
        group = dist.new_group(ranks)
        if dist.get_rank() in ranks:
            mine = group
    return mine


def sum_embedding_grads(chunks: Mapping[int, nn.Module], group: ProcessGroup) -> None:
    """Sum the embedding's gradient (first stage) and its copy's (last stage) over the two, in place.

    Both then hold the whole table's gradient, the lookups', the MTP lookups' and a tied head's,
    and take the same AdamW step: the two copies stay equal, as Megatron's shared
    embedding across its first and last stages.
    """
    for chunk in chunks.values():
        for table in (getattr(chunk, "embed", None), getattr(chunk, "embed_copy", None)):
            if table is None:
                continue
            for param in table.parameters():
                if param.grad is not None:
                    dist.all_reduce(_local(param.grad), group=group)


def _local(tensor: Tensor) -> Tensor:
    """Return a DTensor's local shard (a view of its storage: in-place ops reach it), or the tensor itself."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


__all__ = ["StageChunk", "chunk_spans", "embedding_group", "model_refusals", "rank_chunks", "run_step", "split_model",
           "sum_embedding_grads"]
