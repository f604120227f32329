"""What pricing reads and returns: a prepared model, a grid's prices, the per-column arrays of a group."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from hpdsl.cost.facts.columns import ModelColumns
from hpdsl.cost.feasibility.reasons import CheckCache, check_cache
from hpdsl.cost.formulas import comm as comm_mod
from hpdsl.cost.formulas import flops as flop_mod
from hpdsl.cost.formulas import memory as mem
from hpdsl.cost.formulas.param_shards import ParamSplit
from hpdsl.cost.price.pipeline_layout import Layout, build_layout


@attrs.frozen(eq=False)
class Prepared:
    """A cost model's columns and per-column coefficients, computed once and reused for every grid."""

    columns: ModelColumns
    act: tuple[mem.ActCoeffs, ...]
    flop: tuple[flop_mod.FlopCoeffs, ...]
    comm: tuple[comm_mod.CommCoeffs, ...]
    params: tuple[ParamSplit, ...]
    output_copy: float
    causal: tuple[float, ...]                  # share of each column's score work that is causal
    model_flops: tuple[flop_mod.ModelFlops, ...]  # the MFU convention's forward FLOPs per column
    windows: tuple[int, ...]                   # each column's sliding window (0: none)
    tensors: tuple[float, ...] = ()            # each column's parameter tensors (hpdsl/cost/facts/tensors.py)
    chunks: tuple[int, ...] = ()               # each column's attention chunk (0: none; Llama 4's rotary layers)
    cache: PriceCache = attrs.field(factory=lambda: PriceCache(), repr=False)

    @property
    def n_columns(self) -> int:
        """Return the number of pricing columns."""
        return len(self.columns.columns)

    def layout(self, stages: int, vpp: int, split: tuple[int, ...] | None) -> Layout:
        """Return the layout of `stages`·`vpp` chunks (built once, kept in the cache)."""
        key = (stages, vpp, split)
        found = self.cache.layouts.get(key)
        if found is None:
            c = self.columns
            found = self.cache.layouts[key] = build_layout(c.body_runs, c.mtp_runs, self.n_columns, c.embedding,
                                                           c.output, stages=stages, vpp=vpp, split=split)
        return found

    def checks(self) -> CheckCache:
        """Return the model's validity checks (built on first use, kept in the cache)."""
        if self.cache.checks is None:
            self.cache.checks = check_cache(self.columns)
        return self.cache.checks


@attrs.define(eq=False)
class PriceCache:
    """What pricing one prepared model builds once and reuses: layouts, compiled plans, the compiled checks.

    A cache, so mutable by declaration: `prepare` creates one per Prepared, and whoever
    holds the Prepared (the search, a bench, a test pricing many strategies) holds
    its cache; nothing is cached per process.
    """

    layouts: dict[tuple[int, int, tuple[int, ...] | None], Layout] = attrs.field(factory=dict)
    plans: dict[tuple[Any, ...], Callable[..., Any]] = attrs.field(factory=dict)  # hpdsl/cost/price/scalar.py
    seen: set[tuple[Any, ...]] = attrs.field(factory=set)  # plan keys priced once on floats: the next compiles
    checks: CheckCache | None = None


@attrs.frozen(eq=False)
class GridPrice:
    """Prices of every candidate of a grid (arrays of length n)."""

    peak_bytes: np.ndarray
    peak_stage: np.ndarray
    step_time_s: np.ndarray
    flops_forward: np.ndarray      # model-wide per step
    flops_backward: np.ndarray
    flops_recompute: np.ndarray
    flops_model: np.ndarray        # the MFU convention per step: 3 × (parameter matmuls + attended score square)
    device_flops: np.ndarray | None = None  # per step on the busiest device (with detail)
    communication: dict[str, np.ndarray] | None = None  # bytes per step per device, busiest rank
    stages: tuple[dict[str, np.ndarray] | None, ...] | None = None  # per candidate, arrays over stages


Cols = list[np.ndarray]
Spans = tuple[slice | np.ndarray | None, ...]
"""Per column, where (which ranks or chunks) it is held: a slice, an index array, or None (nowhere)."""


@attrs.frozen(eq=False)
class Columnwise:
    """Per-column arrays of one group: for each quantity, one (n,) array per column."""

    act_none: Cols
    act_delta: Cols      # kept under the strategy's recompute minus kept without it
    static: Cols         # parameter + gradient + optimizer bytes
    tensors: Cols        # parameter tensors (the optimizer's per-tensor host time)
    units: Cols          # FSDP2 units: one per layer (the device's shard_overhead per micro-batch)
    parts: tuple[Cols, Cols, Cols]
    gathered: Cols       # one layer's parameters gathered under ZeRO-3
    deferred: Cols       # deferred accumulation: unsharded gradients beyond the ZeRO-sharded ones
    accumulated: Cols    # gradient bytes each micro-batch after the first adds into (unfused accumulation)
    compute: Cols        # forward + backward seconds
    compute_rec: Cols    # recompute seconds
    tau: Cols            # compute + exposed communication seconds
    tau_rec: Cols
    dp_once: Cols        # gradient-reduction bytes once per step
    dp_micro: Cols       # ... per micro-batch
    tp_once: Cols        # sequence parallelism: tp all-reduce of the replicated parameters' gradients, per step
    fwd: Cols            # executed forward FLOPs per micro-batch
    bwd: Cols            # executed backward FLOPs per micro-batch (2 × forward + the flash recompute)
    rec: Cols
    vol: dict[str, Cols]
    vol_rec: dict[str, Cols]
    model_fwd: Cols
    model_bwd: Cols
    model_rec: Cols
    model_mfu: Cols      # forward FLOPs per sequence in the model convention

    def take(self, part: slice) -> Columnwise:
        """Return the candidates at `part` of every array (views: a group of a grid sorted by layout)."""
        # Field by field, without a generic walk: a search takes a group's columns some forty times.
        params, grads, optimizer = self.parts
        return Columnwise(parts=([a[part] for a in params], [a[part] for a in grads], [a[part] for a in optimizer]),
                          vol={k: [a[part] for a in cols] for k, cols in self.vol.items()},
                          vol_rec={k: [a[part] for a in cols] for k, cols in self.vol_rec.items()},
                          **{name: [a[part] for a in getattr(self, name)] for name in _LISTS})


_LISTS = tuple(name for name in attrs.fields_dict(Columnwise) if name not in ("parts", "vol", "vol_rec"))
"""Columnwise's fields that are one list of per-column arrays."""
