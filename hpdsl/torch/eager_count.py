"""What eager PyTorch code dispatches, counted: aten calls and the elements their non-matmul calls move.

The families' `eager` terms (families/*.hpf; docs/cost-model.md, "Eager execution")
are these counts for the reference modules, and `hpdsl calibrate` prices one call and
one moved byte on this machine with them (hpdsl/torch/calibrate_eager.py). A call
moves the elements of every tensor it reads and writes; views, allocations and the
matmuls (priced as FLOPs at the matmul curve) move none. Each call is attributed to the
outermost child of `root` the ModuleTracker is inside at the time (forward and backward).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.module_tracker import ModuleTracker

MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "_grouped_mm", "_scaled_dot_product_flash_attention_for_cpu",
                     "_scaled_dot_product_flash_attention_for_cpu_backward",
                     "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
                     "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward"})
"""Calls priced as FLOPs (the weight matmuls, the routed experts' grouped GEMMs and attention's kernels), not as moved
elements."""

NO_TRAFFIC = frozenset({"view", "_unsafe_view", "t", "transpose", "expand", "unsqueeze", "slice", "select",
                        "permute", "as_strided", "detach", "alias", "split", "split_with_sizes", "unbind",
                        "squeeze", "_reshape_alias", "narrow", "empty", "empty_strided", "empty_like"})
"""Calls that move no element: views of a tensor, and allocations."""


def moves(name: str) -> bool:
    """Return whether an aten call of this name moves elements (it is neither a view, an allocation nor a matmul)."""
    return name not in MATMULS and name not in NO_TRAFFIC


class EagerCount(TorchDispatchMode):
    """Count aten calls and moved elements, in all and by the outermost module of `root` they run in."""

    def __init__(self, root: nn.Module | None = None) -> None:
        super().__init__()
        self.tracker = ModuleTracker() if root is not None else None
        self.prefix = type(root).__name__ + "." if root is not None else ""
        self.calls: Counter[str] = Counter()
        self.moved: Counter[str] = Counter()

    def __enter__(self) -> EagerCount:
        if self.tracker is not None:
            self.tracker.__enter__()
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        if self.tracker is not None:
            self.tracker.__exit__(*exc)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Run the call, then count it where it ran."""
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        where = self._where()
        self.calls[where] += 1
        if moves(name):
            self.moved[where] += sum(t.numel() for t in tree_flatten((args, kwargs, out))[0]
                                     if isinstance(t, torch.Tensor))
        return out

    def _where(self) -> str:
        """Return the outermost child of the root the call runs in ("" outside every child)."""
        if self.tracker is None:
            return ""
        inside = [p.removeprefix(self.prefix) for p in self.tracker.parents if p.startswith(self.prefix)]
        deepest = max(inside, key=len, default="")
        return deepest.split(".", 1)[0]

    @property
    def total_calls(self) -> int:
        """Return every call counted."""
        return sum(self.calls.values())

    @property
    def total_moved(self) -> int:
        """Return every element moved."""
        return sum(self.moved.values())


__all__ = ["EagerCount", "MATMULS", "NO_TRAFFIC", "moves"]
