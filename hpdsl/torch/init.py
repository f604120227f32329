"""Materialise a meta-built model piece by piece, on this rank only: what `hpdsl train` does without --validate.

A model built for the job's mesh on the meta device holds no memory; `shard_init`
returns the `init` that hpdsl/torch/parallelize.py `parallelize` calls on each
FSDP2 unit just before sharding it, so a rank holds its shards and at most one
unit whole, never the whole model. Each module draws its weights from a
generator seeded by the job's seed, the module's name and this rank's
coordinates on the axes that split it (its experts' ep and etp, a tp-split
parameter's tp): ranks that hold replicas of a module (tp ranks of a norm, a
router) draw the very same values, ranks that hold different parts draw
different ones. The draws are those of `materialize` (hpdsl/torch/model.py):
N(0, 0.02²) linears and embeddings, zero biases, each module's own
reset_parameters otherwise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from hpdsl.torch.modules import ExpertParallelExperts, GroupedExperts

STD = 0.02
"""The standard deviation of the linears' and embeddings' weights (materialize's)."""


class ShardInit:
    """The `init` of `parallelize` for `root`: materialises what of a module is still on the meta device.

    `peak_bytes` is the most parameter bytes this rank held at once while the
    model was materialised and sharded (read after each unit is materialised,
    the moment it is whole): its shards so far and one unit.
    """

    def __init__(self, root: nn.Module, device: torch.device, seed: int, coords: Mapping[str, int]) -> None:
        self.root, self.device, self.seed, self.coords = root, device, seed, coords
        self.names = {id(module): name for name, module in root.named_modules()}
        self.peak_bytes = 0

    def __call__(self, module: nn.Module) -> None:
        """Materialise and draw every part of `module` still on the meta device."""
        for sub in module.modules():
            if _on_meta(sub):
                _materialize_one(sub, self.names.get(id(sub), ""), self.device, self.seed, self.coords)
        held = sum(t.numel() * t.element_size() for t in map(_local, self.root.parameters()) if not t.is_meta)
        self.peak_bytes = max(self.peak_bytes, held)


def shard_init(root: nn.Module, device: torch.device, seed: int, coords: Mapping[str, int]) -> ShardInit:
    """Return the `init` that materialises what of a module of `root` is still on the meta device."""
    return ShardInit(root, device, seed, coords)


def _on_meta(module: nn.Module) -> bool:
    own = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
    return any(_local(t).is_meta for t in own)


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def _materialize_one(module: nn.Module, name: str, device: torch.device, seed: int,
                     coords: Mapping[str, int]) -> None:
    """Allocate `module`'s own parameters and buffers on `device` and draw them."""
    module.to_empty(device=device, recurse=False)
    fork = torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])
    with fork, torch.no_grad():
        torch.manual_seed(_seed(module, name, seed, coords))
        if device.type == "cuda":
            torch.cuda.manual_seed(_seed(module, name, seed, coords))
        draw(module)


def draw(module: nn.Module, std: float = STD) -> None:
    """Draw `module`'s own parameters and state (allocated, not yet set), under torch's current generator.

    Linears and embeddings N(0, std²) with zero biases, any other module its reset_parameters; then
    its `reset_state`, where it holds more than those draw (a router's score correction buffer,
    Gemma 4's router scales): a meta build leaves them unset.
    """
    with torch.no_grad():
        if isinstance(module, (nn.Linear, nn.Conv1d, nn.Embedding)):
            nn.init.normal_(module.weight, std=std)
            if (bias := getattr(module, "bias", None)) is not None:
                nn.init.zeros_(bias)
        elif callable(reset := getattr(module, "reset_parameters", None)):
            reset()
        if callable(state := getattr(module, "reset_state", None)):
            state()


def _seed(module: nn.Module, name: str, seed: int, coords: Mapping[str, int]) -> int:
    """Return the module's generator seed: the job's, its name's, and this rank's place on the axes splitting it."""
    parts = [str(seed), name]
    if isinstance(module, (ExpertParallelExperts, GroupedExperts)):
        parts += [f"ep{coords.get('ep', 0)}", f"etp{coords.get('etp', 0)}"]
    for param in module.parameters(recurse=False):
        if isinstance(param, DTensor) and any(p.is_shard() for p in param.placements):
            parts.append(f"at{param.device_mesh.get_coordinate()}")
            break
    digest = hashlib.blake2b("/".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)
