"""The worker of the multi-process test: one rank of a cp 2 × ep 2 gloo job.

Every rank builds the unsharded reference model and the model for the mesh
from the same spec, copies the reference weights into its shards, and runs one
forward and backward on its share of a global batch (its ep coordinate picks
the sequences, its cp coordinate the chunk of each sequence). The summed loss
and the gradients, reduced over the ranks that share each parameter, must
equal the reference's.
"""

from __future__ import annotations

import json
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch_support import process_group, small_registry

from hpdsl.torch import build_model, materialize, validate_family_context
from hpdsl.torch.modules import ExpertParallelExperts, RingAttention

BATCH, SEQ, VOCAB = 4, 16, 96


def run(rank: int, world: int, store_dir: str, out_dir: str) -> None:
    """Run one rank of the job and write its measurements to out_dir/<rank>.json."""
    torch.set_num_threads(1)
    with process_group(world, rank=rank, store_dir=store_dir):
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("cp", "ep"))
        registry = small_registry()
        reference = materialize(build_model("tiny_moe", registry=registry), "cpu", seed=0)
        sharded = materialize(build_model("tiny_moe", mesh, registry=registry), "cpu", seed=1)
        validate_family_context(sharded, mesh=mesh)
        assert isinstance(sharded.layers[0].mixer, RingAttention)
        shards = _expert_shards(sharded)
        _load_reference(sharded, reference, shards)
        ids, targets = _batch()
        cp, ep = mesh["cp"].get_local_rank(), mesh["ep"].get_local_rank()
        rows, cols = slice(ep * BATCH // 2, (ep + 1) * BATCH // 2), slice(cp * SEQ // 2, (cp + 1) * SEQ // 2)
        local = F.cross_entropy(sharded(ids[rows, cols]).reshape(-1, VOCAB), targets[rows, cols].reshape(-1),
                                reduction="sum") / targets.numel()
        local.backward()
        loss = local.detach().clone()
        dist.all_reduce(loss)
        expected = F.cross_entropy(reference(ids).reshape(-1, VOCAB), targets.reshape(-1))
        expected.backward()
        worst = _compare_gradients(sharded, reference, shards, mesh["cp"].get_group())
        with open(os.path.join(out_dir, f"{rank}.json"), "w", encoding="utf-8") as handle:
            json.dump({"loss": loss.item(), "expected": expected.item(), "worst_grad_error": worst,
                       "local_experts": sharded.layers[0].ffn.experts.local}, handle)


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
            param.copy_(source)


def _compare_gradients(sharded: torch.nn.Module, reference: torch.nn.Module,
                       shards: dict[str, tuple[int, int]], cp_group: dist.ProcessGroup) -> float:
    """Reduce each shard's gradient over the ranks sharing it; return the worst relative error."""
    expected = dict(reference.named_parameters())
    worst = 0.0
    for name, param in sharded.named_parameters():
        grad = param.grad.clone() if param.grad is not None else torch.zeros_like(param)
        want = expected[name].grad
        assert want is not None, name
        if name in shards:  # this expert shard is held by the ranks of one ep coordinate
            dist.all_reduce(grad, group=cp_group)
            first, count = shards[name]
            want = want[first:first + count]
        else:  # replicated on every rank
            dist.all_reduce(grad)
        torch.testing.assert_close(grad, want, rtol=1e-4, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
        scale = want.abs().max().item() or 1.0
        worst = max(worst, (grad - want).abs().max().item() / scale)
    return worst
