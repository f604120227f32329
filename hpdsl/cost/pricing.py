"""A cost model and a strategy grid into prices: peak bytes, FLOPs, traffic and step time per candidate.

The grid evaluator: the search prices millions of candidates through the same
expressions `estimate` compiles for one (hpdsl/cost/scalar.py). Candidates are grouped by pipeline
layout (pp, vpp, split), since a layout fixes how many layers of each column
every chunk holds; within a group every quantity is an array over candidates
(per column) or over candidates × stages, never a Python loop per candidate.
Sums over columns and stages run in a fixed order, so a candidate's price does
not depend on which grid it is priced in.
"""

from __future__ import annotations

import weakref
from typing import Any

import attrs
import numpy as np

from hpdsl.cost import comm as comm_mod
from hpdsl.cost import flops as flop_mod
from hpdsl.cost import memory as mem
from hpdsl.cost import stage, xp
from hpdsl.bound.bind import CostModel
from hpdsl.cost.columns import ModelColumns, model_columns
from hpdsl.cost.context import Ctx, context
from hpdsl.cost.layout import Layout, build_layout, in_flight
from hpdsl.cost.strategy import StrategyGrid

@attrs.frozen(eq=False)
class Prepared:
    """A cost model's columns and per-column coefficients, computed once and reused for every grid."""

    columns: ModelColumns
    act: tuple[mem.ActCoeffs, ...]
    flop: tuple[flop_mod.FlopCoeffs, ...]
    comm: tuple[comm_mod.CommCoeffs, ...]
    params: tuple[mem.ParamSplit, ...]
    output_copy: float
    causal: tuple[float, ...]                  # share of each column's score work that is causal
    model_flops: tuple[flop_mod.ModelFlops, ...]  # the MFU convention's forward FLOPs per column
    windows: tuple[int, ...]                   # each column's sliding window (0: none)
    layouts: dict[tuple[int, int, tuple[int, ...] | None], Layout] = attrs.field(factory=dict)
    plans: dict[tuple[Any, ...], Any] = attrs.field(factory=dict)  # scalar plans, or 1: seen once (cost/scalar.py)

    @property
    def n_columns(self) -> int:
        """Return the number of pricing columns."""
        return len(self.columns.columns)

    def layout(self, stages: int, vpp: int, split: tuple[int, ...] | None) -> Layout:
        """Return (and cache) the layout of `stages`·`vpp` chunks."""
        key = (stages, vpp, split)
        if key not in self.layouts:
            c = self.columns
            self.layouts[key] = build_layout(c.body, c.mtp, self.n_columns, c.embedding, c.output,
                                             stages=stages, vpp=vpp, split=split)
        return self.layouts[key]


_CACHE: dict[int, tuple[weakref.ref[CostModel], Prepared]] = {}


def prepare(cost_model: CostModel) -> Prepared:
    """Return the prepared pricing data of `cost_model` (cached while the model lives)."""
    hit = _CACHE.get(id(cost_model))
    if hit is not None and hit[0]() is cost_model:
        return hit[1]
    columns = model_columns(cost_model)
    cols = columns.columns
    prepared = Prepared(
        columns, tuple(mem.column_act_coeffs(c, columns) for c in cols),
        tuple(flop_mod.column_flop_coeffs(c, columns) for c in cols),
        tuple(comm_mod.column_comm_coeffs(c, columns) for c in cols),
        tuple(mem.column_params(c, columns) for c in cols), mem.output_copy(columns),
        tuple(flop_mod.causal_share(c, columns) for c in cols),
        tuple(flop_mod.column_model_flops(c, columns) for c in cols),
        tuple(flop_mod.column_window(c) for c in cols))
    for key in [key for key, (ref, _) in _CACHE.items() if ref() is None]:
        del _CACHE[key]  # models that are gone
    _CACHE[id(cost_model)] = (weakref.ref(cost_model), prepared)
    return prepared


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


@attrs.frozen(eq=False)
class Columnwise:
    """Per-column arrays of one group: for each quantity, one (n,) array per column."""

    act_none: Cols
    act_delta: Cols      # kept under the strategy's recompute minus kept without it
    static: Cols         # parameter + gradient + optimizer bytes
    parts: tuple[Cols, Cols, Cols]
    gathered: Cols       # one layer's parameters gathered under ZeRO-3
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
        def cut(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: cut(v) for k, v in value.items()}
            if isinstance(value, tuple):
                return tuple(cut(v) for v in value)
            return [a[part] for a in value]
        return Columnwise(**{name: cut(getattr(self, name)) for name in attrs.fields_dict(Columnwise)})


def shared_factors(p: Prepared, x: Ctx) -> tuple[Any, Any, Any]:
    """Return what every column's prices share: ZeRO factors, gradient-reduction factors, the output's copy."""
    return (mem.static_factors(x), comm_mod.data_parallel_factors(x),
            xp.where(x.pp > 1, p.output_copy, 0.0))


def _columnwise(p: Prepared, x: Ctx) -> Columnwise:
    """Return every per-column quantity of a grid (a column's values do not depend on the layout)."""
    shared = shared_factors(p, x)
    rows = [column_values(p, j, x, *shared) for j in range(p.n_columns)]
    flat = {k: [row[k] for row in rows] for k in attrs.fields_dict(Columnwise)
            if k not in ("parts", "vol", "vol_rec")}
    params, grads, optimizer = ([row["parts"][k] for row in rows] for k in range(3))
    return Columnwise(
        parts=(params, grads, optimizer),
        vol={axis: [getattr(row["traffic"], axis) for row in rows] for axis in ("tp", "cp", "ep")},
        vol_rec={axis: [getattr(row["traffic"], f"rec_{axis}") for row in rows]
                 for axis in ("tp", "cp", "ep")},
        **flat)


def column_values(p: Prepared, j: int, x: Ctx, factors: Any, dp_factors: tuple[Any, ...],
                  output_copy: Any) -> dict[str, Any]:
    """Return one column's arrays (n,), or floats for one strategy: bytes, seconds, FLOPs and traffic per micro-batch."""
    role = p.columns.columns[j].role
    layer, zero = role in ("layer", "mtp"), xp.zeros_like(x.tok)
    if layer:
        none, rec = mem.recomputed_activation(p.act[j], x)
    else:
        none = rec = mem.activation(p.act[j], x)[0]
    dense, expert = mem.device_params(p.params[j], x, output_copy if role == "output" else 0.0)
    parts = mem.static_bytes(dense, expert, factors)
    once_dense, once_expert, micro_dense, micro_expert = dp_factors
    c, keys = p.flop[j], flop_mod.executed_keys(x, p.causal[j], p.windows[j])
    fwd = flop_mod.device_forward(c, x, keys)
    bwd = flop_mod.BACKWARD * fwd + flop_mod.device_flash_backward(c, x, keys)
    frec = flop_mod.device_recompute(c, x, fwd, keys) if layer else zero
    score = flop_mod.device_scores(c, x, keys) / x.flops if c.ts or c.w_ts else zero
    traffic = comm_mod.layer_comm(p.comm[j], x, 3 * score, xp.where(x.recompute >= 1, score, 0.0))
    compute, compute_rec = (fwd + bwd) / x.flops, frec / x.flops
    model_fwd = flop_mod.model_forward(c, x, keys)
    values = {
        "act_none": none, "act_delta": rec - none if layer else zero,
        "static": parts[0] + parts[1] + parts[2],
        "gathered": x.b_p * (dense + expert) if layer else zero,
        "compute": compute, "compute_rec": compute_rec, "tau": compute + traffic.time,
        "tau_rec": compute_rec + traffic.rec_time if layer else zero,
        "dp_once": dense * once_dense + expert * once_expert,
        "dp_micro": dense * micro_dense + expert * micro_expert, "fwd": fwd, "bwd": bwd, "rec": frec,
        "tp_once": sp_grad_allreduce(p.params[j].rep, x),
        "model_fwd": model_fwd,
        "model_bwd": flop_mod.BACKWARD * model_fwd + flop_mod.model_flash_backward(c, x, keys),
        "model_rec": flop_mod.model_recompute(c, x, keys) if layer else zero,
        "model_mfu": x.s * (p.model_flops[j].per_token
                            + p.model_flops[j].per_key * flop_mod.model_keys(x, p.causal[j], p.windows[j]))}
    out: dict[str, Any] = {k: xp.broadcast(v, x.tok) for k, v in values.items()}
    out.update(parts=parts, traffic=traffic)
    return out


def sp_grad_allreduce(replicated: float, x: Ctx) -> Any:
    """Return the bytes one device sends per step to all-reduce replicated parameters' gradients over tp.

    Under sequence parallelism each tp rank computes a replicated parameter's
    gradient from its own slice of the sequence (norms, the router, MLA's latent
    projections, a whole mixer, row-parallel biases), so the slices are summed
    over tp once per step, as Megatron does for its sequence-parallel norms.
    Without sp every rank saw the whole sequence: nothing to sum.
    """
    ring = 2 * (x.t - 1) / x.t
    return xp.where(x.sp > 1, ring * x.b_g * replicated, 0.0)


def _weighted(counts: np.ndarray, values: Cols, spans: Spans) -> np.ndarray:
    """Return Σ_j counts[r, j]·values[j], (R, n), in column order.

    counts is (R, J) or (R, J, n); spans[j] says where counts[r, j] can be non-zero
    (Layout.chunk_spans / rank_spans), so a column held by a few neighbouring ranks
    (the dense layers, embedding, output, MTP) costs a product over those ranks only.
    Ranks are the leading axis, candidates the contiguous one: every product and
    every reduction over ranks runs along whole rows of candidates.
    """
    acc = np.zeros((counts.shape[0], len(values[0])))
    for j, value in enumerate(values):
        ranks = spans[j]
        if ranks is not None:
            weight = counts[ranks, j] if counts.ndim == 3 else counts[ranks, j][:, None]
            acc[ranks] += weight * value
    return acc


def _recomputed(p: Prepared, layout: Layout, x: Ctx) -> np.ndarray:
    """Return recomputed layers per chunk and column: (C, J), or (C, J, n) for first-N recompute."""
    layer_cols = np.zeros(p.n_columns, dtype=bool)
    layer_cols[list(p.columns.layer_columns)] = True
    if np.all(x.all_layers):
        return layout.comp * layer_cols
    limit = np.where(x.all_layers, layout.cum.shape[1] - 1, x.recompute_layers).astype(np.int64)
    index = np.minimum(limit[None, :], layout.chunk_layers[:, None])
    rc = np.moveaxis(layout.cum[np.arange(layout.chunks)[:, None], index], -1, 1)
    mtp = np.zeros(p.n_columns, dtype=bool)
    mtp[list(set(p.columns.mtp))] = True
    return rc + (layout.comp * mtp)[:, :, None] * x.all_layers[None, None, :]


def _per_rank(chunk_values: np.ndarray, stages: int, vpp: int) -> np.ndarray:
    """Return chunk values (C, ...) summed over each rank's chunks, (S, ...), in chunk order."""
    acc = chunk_values[:stages]
    for position in range(1, vpp):
        acc = acc + chunk_values[position * stages:(position + 1) * stages]
    return acc


def _present_max(spans: Spans, ranks: int, values: Cols, columns: tuple[int, ...]) -> np.ndarray:
    """Return (S, n): the largest value among the given columns a rank holds."""
    acc = np.zeros((ranks, len(values[0])))
    for j in columns:
        where = spans[j]
        if where is not None:
            acc[where] = np.maximum(acc[where], values[j])
    return acc


@attrs.frozen(eq=False)
class _Group:
    """One layout group being priced: its context, per-column arrays and recomputed counts."""

    prepared: Prepared
    x: Ctx                # arrays (n,): they broadcast against (S, n) in the per-rank formulas
    cw: Columnwise
    layout: Layout
    rc: np.ndarray        # recomputed layers per chunk and column: (C, J) or (C, J, n)
    rc_rank: np.ndarray   # ... per rank: (S, J) or (S, J, n)

    def ranks(self, values: Cols, recomputed: Cols | None = None) -> np.ndarray:
        """Return (S, n): Σ over each rank's layers of `values` (+ `recomputed` for recomputed ones)."""
        spans = self.layout.rank_spans
        out = _weighted(self.layout.rank_comp, values, spans)
        return out if recomputed is None else out + _weighted(self.rc_rank, recomputed, spans)


def _group(p: Prepared, x: Ctx, cw: Columnwise, layout: Layout) -> _Group:
    rc = _recomputed(p, layout, x)
    return _Group(p, x, cw, layout, rc, _per_rank(rc, layout.stages, layout.vpp))


def _memory(g: _Group) -> dict[str, np.ndarray]:
    """Return (S, n) bytes per rank: static, activations (in flight), transient, total."""
    x, cw, layout = g.x, g.cw, g.layout
    spans, rank_spans, S = layout.chunk_spans, layout.rank_spans, layout.stages
    per_chunk = _weighted(layout.comp, cw.act_none, spans) + _weighted(g.rc, cw.act_delta, spans)
    activations = _per_rank(in_flight(S, layout.vpp, x.m) * per_chunk, S, layout.vpp)
    static = g.ranks(cw.static)
    layers = g.prepared.columns.layer_columns
    transient, total = stage.rank_memory(x, static, activations,
                                         _present_max(rank_spans, S, cw.act_none, layers), _gathered(g))
    return {"static": static, "activations": activations, "transient": transient, "total": total}


def _gathered(g: _Group) -> np.ndarray:
    """Return (S, n): the parameters ZeRO-3 holds gathered at once on each rank.

    With the profile's `reshard_params` FSDP frees a layer's gathered parameters once it
    has run (FSDP2's reshard_after_forward): one layer at a time. Without it every
    layer's stay gathered from its forward until its backward: at the end of the
    forward, all of the rank's layers at once (hpdsl/cost/scalar.py prices the same).
    """
    if g.prepared.columns.cost_model.profile.run.reshard_params:
        return _present_max(g.layout.rank_spans, g.layout.stages, g.cw.gathered, g.prepared.columns.layer_columns)
    return g.ranks(g.cw.gathered)  # zero outside the layer columns


def _time(g: _Group) -> dict[str, np.ndarray]:
    """Return per-rank micro-batch seconds, gradient traffic, and the modeled step time."""
    x, cw = g.x, g.cw
    pp_bytes = comm_mod.pipeline_bytes(x, g.prepared.columns.cost_model.model.hidden)
    compute = g.ranks(cw.compute, cw.compute_rec) if stage.exposed_micro(x) else None
    once, tp_once = g.ranks(cw.dp_once), g.ranks(cw.tp_once)
    t_rank, once_s = stage.rank_time(x, g.ranks(cw.tau, cw.tau_rec), pp_bytes, compute,
                                     g.ranks(cw.dp_micro) if compute is not None else 0.0, once, tp_once)
    # np.add.accumulate adds the ranks in order, as the scalar evaluator does.
    step = stage.step_time(x, np.add.accumulate(t_rank, axis=0)[-1], t_rank.max(axis=0), once_s.max(axis=0),
                           g.layout.vpp)
    return {"time": t_rank, "pp": pp_bytes, "once": once, "tp_once": tp_once, "step": step}


def _details(g: _Group, memory: dict[str, np.ndarray], time: dict[str, np.ndarray]
             ) -> dict[str, np.ndarray]:
    """Return the per-rank breakdown an Estimate reports: bytes by part, FLOPs, traffic, time."""
    x, cw = g.x, g.cw
    params, grads, optim = (g.ranks(part) for part in cw.parts)
    moved = {axis: g.ranks(cw.vol[axis], cw.vol_rec[axis]) for axis in ("tp", "cp", "ep")}
    traffic = stage.rank_traffic(x, moved, time["tp_once"], time["pp"], time["once"], g.ranks(cw.dp_micro))
    traffic["pp"] = np.broadcast_to(traffic["pp"], params.shape)
    return {"params": params, "grads": grads, "optimizer": optim,
            "activations": memory["activations"], "transient": memory["transient"],
            "total": memory["total"], "flops": x.m * g.ranks([f + b for f, b in zip(cw.fwd, cw.bwd)], cw.rec),
            "time": time["time"], **traffic}


def _price_group(p: Prepared, x: Ctx, cw: Columnwise, layout: Layout, detail: bool) -> dict[str, Any]:
    g = _group(p, x, cw, layout)
    memory, time = _memory(g), _time(g)
    counts = layout.comp.sum(axis=0)
    out: dict[str, Any] = {
        "peak_bytes": memory["total"].max(axis=0), "peak_stage": memory["total"].argmax(axis=0),
        "step_time_s": time["step"], "flops_forward": x.batch * _sum_columns(counts, cw.model_fwd),
        "flops_backward": x.batch * _sum_columns(counts, cw.model_bwd),
        "flops_model": 3 * x.batch * _sum_columns(counts, cw.model_mfu),
        "flops_recompute": x.batch * _sum_columns(g.rc.sum(axis=0), cw.model_rec),
    }
    if detail:
        stages = _details(g, memory, time)
        out["device_flops"] = stages["flops"].max(axis=0)
        out["communication"] = {axis: stages[axis].max(axis=0) for axis in comm_mod.AXES}
        out["stages"] = [{k: np.ascontiguousarray(v[:, i]) for k, v in stages.items()}
                         for i in range(memory["total"].shape[1])]
    return out


def _sum_columns(counts: np.ndarray, values: Cols) -> np.ndarray:
    """Return Σ_j counts[j]·values[j], (n,), in column order; counts (J,) or (J, n)."""
    acc = np.zeros(len(values[0]))
    for j, value in enumerate(values):
        acc = acc + counts[j] * value
    return acc


def price_grid(cost_model: CostModel | Prepared, grid: StrategyGrid, *, detail: bool = False
               ) -> GridPrice:
    """Price every candidate of a grid of valid strategies.

    The grid is ordered by layout (the search's chunks already are), the per-column
    values computed once for all of it, and each layout's run of candidates priced
    through views of them.
    """
    p = cost_model if isinstance(cost_model, Prepared) else prepare(cost_model)
    n = len(grid)
    key = (grid.pp.astype(np.int64) << 40) | (grid.vpp.astype(np.int64) << 20) | grid.split_id
    order = None if bool(np.all(key[1:] >= key[:-1])) else np.argsort(key, kind="stable")
    if order is not None:
        grid, key = grid.take(order), key[order]
    bounds = [0, *(np.flatnonzero(key[1:] != key[:-1]) + 1).tolist(), n] if n else [0]
    result: dict[str, Any] = {}
    stages: list[dict[str, np.ndarray] | None] = [None] * n
    with np.errstate(divide="ignore", invalid="ignore"):
        x = context(grid, p.columns.cost_model.profile.run)
        cw = _columnwise(p, x)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            part = slice(lo, hi)
            layout = p.layout(int(grid.pp[lo]), int(grid.vpp[lo]), grid.splits[int(grid.split_id[lo])])
            priced = _price_group(p, x.take(part), cw.take(part), layout, detail)
            index = part if order is None else order[part]
            _scatter(result, priced, index, n)
            for i, row in zip(range(lo, hi) if order is None else order[part].tolist(), priced.get("stages", ())):
                stages[i] = row
    return GridPrice(**{k: v for k, v in result.items() if k != "stages"},
                     stages=tuple(stages) if detail else None)


def _scatter(result: dict[str, Any], priced: dict[str, Any], index: np.ndarray | slice, n: int) -> None:
    """Write one group's arrays into the whole grid's, at `index`."""
    for key, value in priced.items():
        if key == "stages":
            continue
        if isinstance(value, dict):
            target = result.setdefault(key, {})
            for axis, arr in value.items():
                target.setdefault(axis, np.zeros(n, dtype=arr.dtype))[index] = arr
        else:
            result.setdefault(key, np.zeros(n, dtype=value.dtype))[index] = value
