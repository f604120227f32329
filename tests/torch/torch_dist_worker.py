"""The worker of the multi-process test: one rank of a 4-rank gloo job, run as five 2 × 2 meshes in turn.

- cp 2 × ep 2 on tiny_moe: ring attention over cp, expert parallelism over ep;
- ep 2 × tp 2 on tiny_qwen3_next: the families' tensor-parallel layouts over tp
  (heads split with the output gate and QK norms, column/row-parallel shared
  expert, replicated Gated DeltaNet and experts), expert parallelism over ep;
- ep 2 × tp 2 on tiny_deepseek_v3: MLA split by heads over tp (replicated
  latent down-projections and norms), expert parallelism over ep;
- ep 2 × tp 2 on tiny_deepseek_v32: the same with DSA's replicated indexer, whose
  KL objective's target is summed over tp; and cp 2 × ep 2, its index keys
  all-gathered over cp with the ring's keys and values.

Every rank builds the unsharded reference model and the model for the mesh
from the same spec, copies the reference weights into its shards, and runs one
forward and backward on its share of a global batch (its ep coordinate picks
the sequences, its cp coordinate the chunk of each sequence; tp ranks share
their data). The summed loss and the gradients (tp shards gathered, then summed
over the ranks that hold the same shard with other data) must equal the
reference's.
"""

from __future__ import annotations

import json
import os

import attrs
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel import loss_parallel
from torch_support import process_group, small_registry

from hpdsl.torch import build_model, get_family_build_info, materialize, validate_family_context
from hpdsl.torch.modules import ExpertParallelExperts, RingAttention, RingMLAttention

BATCH, SEQ, VOCAB = 4, 16, 96


@attrs.frozen
class Layout:
    """One 2 × 2 job: its model, mesh axes, and the last layer's mixer parameter whose shapes it reports."""

    model: str
    axes: tuple[str, str]
    probe: str = "q_proj.weight"


LAYOUTS = {"cp_ep": Layout("tiny_moe", ("cp", "ep")), "tp_ep": Layout("tiny_qwen3_next", ("ep", "tp")),
           "mla_tp_ep": Layout("tiny_deepseek_v3", ("ep", "tp"), "kv_b_proj.weight"),
           "dsa_tp_ep": Layout("tiny_deepseek_v32", ("ep", "tp"), "indexer.wq_b.weight"),
           "dsa_cp_ep": Layout("tiny_deepseek_v32", ("cp", "ep"), "indexer.wq_b.weight")}


def run(rank: int, world: int, store_dir: str, out_dir: str) -> None:
    """Run one rank of both jobs and write their measurements to out_dir/<rank>.json."""
    torch.set_num_threads(1)
    with process_group(world, rank=rank, store_dir=store_dir):
        results = {name: _run_layout(layout, init_device_mesh("cpu", (2, 2), mesh_dim_names=layout.axes))
                   for name, layout in LAYOUTS.items()}
    with open(os.path.join(out_dir, f"{rank}.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle)


def _run_layout(layout: Layout, mesh: DeviceMesh) -> dict[str, object]:
    registry = small_registry()
    reference = materialize(build_model(layout.model, registry=registry), "cpu", seed=0)
    sharded = materialize(build_model(layout.model, mesh, registry=registry), "cpu", seed=1)
    validate_family_context(sharded, mesh=mesh)
    shards = _expert_shards(sharded)
    _load_reference(sharded, reference, shards)
    ids, targets = _batch()
    (cp, cps), (ep, eps) = _coordinate(mesh, "cp"), _coordinate(mesh, "ep")
    rows, cols = slice(ep * BATCH // eps, (ep + 1) * BATCH // eps), slice(cp * SEQ // cps, (cp + 1) * SEQ // cps)
    logits = sharded(ids[rows, cols])  # under tp a DTensor split over the vocabulary
    with loss_parallel():
        local = F.cross_entropy(logits.flatten(0, 1), targets[rows, cols].reshape(-1),
                                reduction="sum") / targets.numel()
        local.backward()
    data_group = None if "tp" not in layout.axes else mesh["ep"].get_group()  # tp ranks share their data
    loss = (local.full_tensor() if isinstance(local, DTensor) else local).detach().clone()
    dist.all_reduce(loss, group=data_group)
    expected = F.cross_entropy(reference(ids).reshape(-1, VOCAB), targets.reshape(-1))
    expected.backward()
    expert_group = mesh["cp"].get_group() if "cp" in layout.axes else None
    worst = _compare_gradients(sharded, reference, shards, data_group, expert_group)
    last = len(sharded.layers) - 1  # a full-attention MoE layer in both models
    return {"loss": loss.item(), "expected": expected.item(), "worst_grad_error": worst,
            "local_experts": sharded.layers[last].ffn.experts.local,
            "ring": isinstance(sharded.layers[last].mixer, (RingAttention, RingMLAttention)),
            "dtensors": sum(isinstance(p, DTensor) for p in sharded.parameters()),
            "probe": _shapes(sharded, f"layers.{last}.mixer", layout.probe)}


def _coordinate(mesh: DeviceMesh, axis: str) -> tuple[int, int]:
    """Return this rank's coordinate on `axis` and the axis size ((0, 1) when the mesh lacks it)."""
    if axis not in (mesh.mesh_dim_names or ()):
        return 0, 1
    return mesh[axis].get_local_rank(), mesh[axis].size()


def _shapes(model: torch.nn.Module, path: str, name: str) -> list[list[int]]:
    """Return [logical shape, local shape] of a family parameter, as its provenance records them."""
    info = get_family_build_info(model.get_submodule(path))
    assert info is not None and info.layout is not None
    (record,) = [p for p in info.layout.parameters if p.name == name]
    return [list(record.logical_shape), list(record.local_shape)]


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1234)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
    return ids, torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)


def _expert_shards(model: torch.nn.Module) -> dict[str, tuple[int, int]]:
    """Return parameter name → (first expert, count) for every expert-parallel shard."""
    return {f"{path}.{name}": (module.first, module.local)
            for path, module in model.named_modules() if isinstance(module, ExpertParallelExperts)
            for name, _ in module.named_parameters(recurse=False)}


def _load_reference(sharded: torch.nn.Module, reference: torch.nn.Module,
                    shards: dict[str, tuple[int, int]]) -> None:
    full = reference.state_dict()
    with torch.no_grad():
        for name, param in sharded.named_parameters():
            source = full[name]
            if name in shards:
                first, count = shards[name]
                source = source[first:first + count]
            if isinstance(param, DTensor):
                param.to_local().copy_(_local_shard(source, param))
            else:
                param.copy_(source)


def _local_shard(full: torch.Tensor, param: DTensor) -> torch.Tensor:
    (placement,) = param.placements
    if not isinstance(placement, Shard):
        return full
    tp = param.device_mesh.size()
    return full.chunk(tp, dim=placement.dim)[param.device_mesh.get_local_rank()]


def _compare_gradients(sharded: torch.nn.Module, reference: torch.nn.Module, shards: dict[str, tuple[int, int]],
                       data_group: dist.ProcessGroup | None, expert_group: dist.ProcessGroup | None) -> float:
    """Gather tp shards, sum each gradient over the ranks holding it with other data; return the worst error."""
    expected = dict(reference.named_parameters())
    worst = 0.0
    for name, param in sharded.named_parameters():
        grad = param.grad if param.grad is not None else torch.zeros_like(param)
        grad = grad.full_tensor() if isinstance(grad, DTensor) else grad.clone()
        want = expected[name].grad
        assert want is not None, name
        if name in shards:  # this expert shard is held by the ranks of one ep coordinate
            if expert_group is not None:
                dist.all_reduce(grad, group=expert_group)
            first, count = shards[name]
            want = want[first:first + count]
        else:  # replicated over the data-parallel ranks
            dist.all_reduce(grad, group=data_group)
        torch.testing.assert_close(grad, want, rtol=1e-4, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
        scale = want.abs().max().item() or 1.0
        worst = max(worst, (grad - want).abs().max().item() / scale)
    return worst
