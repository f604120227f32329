"""A bound model and a device count into the fastest strategies that fit, priced as numpy arrays.

The search enumerates every factorisation N = dp·tp·pp·cp with the expert
degrees ep·etp dividing dp·cp·tp (Megatron's expert mesh), crossed with the
micro-batch sizes, recompute choices, optimizer sharding levels, context-parallel
kinds and virtual stages asked for. The enumeration is a product of small index
arrays; validity is the vectorised rule set of hpdsl.cost.feasibility.rules; pricing is
hpdsl.cost.price.grid over chunks of the grid. Python loops run over divisors and
chunks, never over candidates.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import attrs
import numpy as np

from hpdsl.bound.bind import CostModel
from hpdsl.cost.estimate import Estimate, estimate
from hpdsl.cost.facts.devices import get_device
from hpdsl.cost.feasibility.rules import invalid_mask
from hpdsl.cost.price.prepare import prepare
from hpdsl.cost.price.types import Prepared
from hpdsl.cost.sweep import rank
from hpdsl.cost.sweep.chunks import bounded, price_chunks
from hpdsl.cost.sweep.prune import Goal
from hpdsl.cost.sweep.space import full_grid, search_space
from hpdsl.cost.sweep.uneven import NEAR_FIT, UNEVEN_TRIED, uneven_candidates
from hpdsl.model.strategy import CP_KINDS, RECOMPUTE, Strategy, ZERO


@attrs.frozen
class SearchResult:
    """The ranked strategies that fit, and what the sweep did."""

    model: str
    devices: int
    memory_bytes: int
    enumerated: int
    valid: int
    fitting: int
    seconds: float
    top: tuple[Estimate, ...]
    stands_for: tuple[int, ...] = ()   # per row: equivalent strategies it represents (hpdsl/cost/sweep/rank.py)
    pareto: bool = False               # the rows are the memory/step-time frontier, not the fastest
    skipped: int = 0                   # of `enumerated`: neither checked nor priced, their bounds could not win

    def to_json(self) -> dict[str, object]:
        """Return the result as `hpdsl search --json` prints it (the parameters once, not per entry)."""
        top = [{k: v for k, v in e.to_json().items() if k not in ("params", "model", "machine")} for e in self.top]
        for row, count in zip(top, self.stands_for):
            row["stands_for"] = count
        params = self.top[0].params.to_json() if self.top else None
        machine = self.top[0].to_json()["machine"] if self.top else None
        return {"model": self.model, "devices": self.devices, "memory_bytes": self.memory_bytes, "machine": machine,
                "enumerated": self.enumerated, "skipped": self.skipped, "valid": self.valid, "fitting": self.fitting,
                "seconds": self.seconds, "pareto": self.pareto, "params": params, "top": top}

def search(cost_model: CostModel | Prepared, devices: int, memory_bytes: float | None = None, *,
           device: str = "h100", top: int = 10, global_batch: int = 1024, seq_len: int = 4096,
           micro_batches: Sequence[int] = (1, 2, 4, 8), recompute: Sequence[str] = RECOMPUTE,
           zero: Sequence[str] = ZERO, cp_kinds: Sequence[str] = CP_KINDS,
           vpp: Sequence[int] = (1,), base: Strategy | None = None,
           progress: bool | None = None, precision: str | None = None, optimizer: str | None = None,
           impl: str | None = None, softmax_bytes: int | None = None, pareto: bool = False,
           mfu: float | None = None, _exhaustive: bool = False) -> SearchResult:
    """Return the `top` fastest valid strategies for `devices` that fit `memory_bytes` each (or the frontier).

    Candidates whose lower bounds cannot beat the answer are skipped unpriced
    (hpdsl/cost/sweep/prune.py); `_exhaustive` prices every one instead (the tests hold both equal).
    """
    start = time.perf_counter()
    base = (base or Strategy()).with_(device=device)
    if mfu is not None:  # 0: the device time model (hpdsl/cost/formulas/device_time.py)
        base = base.with_(mfu=mfu)
    base = base.with_(precision=precision or base.precision, optimizer=optimizer or base.optimizer,
                      impl=impl or base.impl,
                      softmax_bytes=base.softmax_bytes if softmax_bytes is None else softmax_bytes)
    rank.require_search_inputs(rank.search_input_reasons(
        devices, memory_bytes, top, micro_batches=micro_batches, vpp=vpp, global_batch=global_batch,
        seq_len=seq_len, precision=base.precision, optimizer=base.optimizer, impl=base.impl,
        softmax_bytes=base.softmax_bytes))
    prepared = cost_model if isinstance(cost_model, Prepared) else prepare(cost_model)
    capacity = int(memory_bytes) if memory_bytes is not None else get_device(device).memory_bytes
    space = search_space(prepared, devices, global_batch=global_batch, seq_len=seq_len,
                         micro_batches=micro_batches, recompute=recompute, zero=zero,
                         cp_kinds=cp_kinds, vpp=vpp, base=base)
    if _exhaustive:
        grid = full_grid(space)
        # The layouts passed the families' requires in _model_layouts: the rest of the rules judge the grid.
        valid = rank.canonical_zero(grid.take(~invalid_mask(prepared.columns, grid, requires=False,
                                                            shape=prepared.checks().checks.shape)))
        times, peaks = price_chunks(prepared, valid, progress, start)
        considered, skipped, work, memo = len(grid), 0, None, None
    else:
        goal = Goal(top, pareto, capacity, NEAR_FIT, UNEVEN_TRIED)
        found = bounded(prepared, space, goal, progress, start)
        valid, times, peaks, work, memo = found.grid, found.times, found.peaks, found.work, found.memo
        considered, skipped = found.checked + found.skipped, found.skipped
    extra, extra_times, extra_peaks = uneven_candidates(prepared, valid, times, peaks, capacity, work, memo)
    times, peaks = np.concatenate([times, extra_times]), np.concatenate([peaks, extra_peaks])
    fits = np.nonzero(peaks <= capacity)[0]
    ranked, counts = (rank.pareto if pareto else rank.collapse)(times, peaks, fits)
    best = tuple(estimate(prepared, valid.strategy(i) if i < len(valid) or extra is None
                          else extra.strategy(i - len(valid)))
                 for i in ranked[:top].tolist())
    return SearchResult(prepared.columns.cost_model.model.name, devices, capacity,
                        considered + len(extra_times), len(times), len(fits), time.perf_counter() - start, best,
                        tuple(int(c) for c in counts[:top]), pareto, skipped)
