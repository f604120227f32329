"""The grid evaluator's per-rank half: one layout's columns summed into each rank's bytes and seconds.

hpdsl/cost/price/grid.py computes every column's values over a grid of candidates
(arrays (n,)); here one layout group's values are weighted by how many layers
of each column every chunk and rank holds, and the per-rank formulas
(hpdsl/cost/formulas/stage.py) run on the sums. Ranks are the leading axis, candidates
the contiguous one, so every product and every reduction over ranks runs along
whole rows of candidates. Ranks (and chunks) that hold the same layers get the
same sums: they are computed once per distinct row of counts and spread to
the ranks only where a rank's own position matters (activations in flight, the
sum of every rank's time in order). Sums run in column order and ranks add in
rank order, as in the scalar evaluator (hpdsl/cost/price/scalar.py).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from hpdsl.cost.formulas import comm as comm_mod
from hpdsl.cost.formulas import stage
from hpdsl.cost.formulas.context import Ctx
from hpdsl.cost.formulas.device_time import uses_device_model
from hpdsl.cost.price.pipeline_layout import Layout, in_flight, span
from hpdsl.cost.price.types import Cols, Columnwise, Prepared, Spans


def weighted_sum(counts: np.ndarray, values: Cols, spans: Spans) -> np.ndarray:
    """Return Σ_j counts[r, j]·values[j], (R, n), in column order.

    counts is (R, J) or (R, J, n); spans[j] says where counts[r, j] is non-zero,
    so a column held by a few neighbouring ranks (the dense layers, embedding,
    output, MTP) costs a product over those ranks only.
    """
    acc = np.zeros((counts.shape[0], len(values[0])))
    for j, value in enumerate(values):
        ranks = spans[j]
        if ranks is not None:
            weight = counts[ranks, j] if counts.ndim == 3 else counts[ranks, j][:, None]
            acc[ranks] += weight * value
    return acc


def weighted_sums(counts: np.ndarray, fields: list[Cols], spans: Spans) -> np.ndarray:
    """Return (F, R, n): weighted_sum(counts, values, spans) of each of `fields`, one product per column for all.

    The same products, added in the same column order, as F calls of weighted_sum:
    only numpy's per-call work is shared (a group's ranks are few and its candidates a few thousand).
    """
    acc = np.zeros((len(fields), counts.shape[0], len(fields[0][0])))
    for j in range(len(fields[0])):
        ranks = spans[j]
        if ranks is not None:
            weight = counts[ranks, j] if counts.ndim == 3 else counts[ranks, j][:, None]
            acc[:, ranks] += weight * np.stack([values[j] for values in fields])[:, None, :]
    return acc


def _recomputed(p: Prepared, layout: Layout, x: Ctx) -> np.ndarray:
    """Return recomputed layers per chunk and column: (C, J), or (C, J, n) for first-N recompute."""
    layer_cols = np.zeros(p.n_columns, dtype=bool)
    layer_cols[list(p.columns.layer_columns)] = True
    if np.all(x.all_layers):
        return layout.comp * layer_cols
    limit = np.where(x.all_layers, layout.chunk_layers.max(initial=0), x.recompute_layers).astype(np.int64)
    rc = np.moveaxis(layout.first_layers(np.minimum(limit[None, :], layout.chunk_layers[:, None])), -1, 1)
    mtp = np.zeros(p.n_columns, dtype=bool)
    mtp[list(p.columns.mtp_columns)] = True
    return rc + (layout.comp * mtp)[:, :, None] * x.all_layers[None, None, :]


def per_rank_sum(chunk_values: np.ndarray, stages: int, vpp: int) -> np.ndarray:
    """Return chunk values (C, ...) summed over each rank's chunks, (S, ...), in chunk order."""
    acc = chunk_values[:stages]
    for position in range(1, vpp):
        acc = acc + chunk_values[position * stages:(position + 1) * stages]
    return acc


def _present_max(spans: Spans, rows: int, values: Cols, columns: tuple[int, ...]) -> np.ndarray:
    """Return (R, n): the largest value among the given columns a rank holds."""
    acc = np.zeros((rows, len(values[0])))
    for j in columns:
        where = spans[j]
        if where is not None:
            acc[where] = np.maximum(acc[where], values[j])
    return acc


@attrs.frozen(eq=False)
class Rows:
    """The distinct rows of counts of ranks (or chunks): each held once, and which one every rank is."""

    counts: np.ndarray       # (U, J) layers of each column
    recomputed: np.ndarray   # (U, J) or (U, J, n) recomputed layers of each column
    inverse: np.ndarray      # (R,) each rank's row
    spans: Spans             # per column, the rows that hold it


def distinct_rows(counts: np.ndarray, recomputed: np.ndarray) -> Rows:
    """Return the distinct rows of (counts, recomputed); per candidate recompute counts keep every rank."""
    if recomputed.ndim == 3:
        index, inverse = np.arange(len(counts)), np.arange(len(counts))
    else:
        _, index, inverse = np.unique(np.concatenate([counts, recomputed], axis=1), axis=0,
                                      return_index=True, return_inverse=True)
    kept = counts[index]
    return Rows(kept, recomputed[index], inverse.ravel(),
                tuple(span(kept[:, j] > 0) for j in range(kept.shape[1])))


@attrs.frozen(eq=False)
class Group:
    """One layout group being priced: its context, per-column arrays and its distinct ranks and chunks."""

    prepared: Prepared
    x: Ctx                # arrays (n,): they broadcast against (R, n) in the per-rank formulas
    cw: Columnwise
    layout: Layout
    rc: np.ndarray        # recomputed layers per chunk and column: (C, J) or (C, J, n)
    ranks_of: Rows
    chunks_of: Rows

    def ranks(self, values: Cols, recomputed: Cols | None = None) -> np.ndarray:
        """Return (U, n) per distinct rank: Σ over its layers of `values` (+ `recomputed` for recomputed ones)."""
        rows = self.ranks_of
        out = weighted_sum(rows.counts, values, rows.spans)
        return out if recomputed is None else out + weighted_sum(rows.recomputed, recomputed, rows.spans)

    def ranks_many(self, values: dict[str, Cols], recomputed: dict[str, Cols]) -> dict[str, np.ndarray]:
        """Return ranks(values[k], recomputed.get(k)) of every k, the sums of all taken together (weighted_sums)."""
        rows = self.ranks_of
        out = dict(zip(values, weighted_sums(rows.counts, list(values.values()), rows.spans)))
        if recomputed:
            for k, again in zip(recomputed, weighted_sums(rows.recomputed, list(recomputed.values()), rows.spans)):
                out[k] = out[k] + again
        return out

    def spread(self, per_row: Any) -> Any:
        """Return (S, n): a (U, n) array's row for every rank."""
        return per_row[self.ranks_of.inverse] if isinstance(per_row, np.ndarray) else per_row


def group(p: Prepared, x: Ctx, cw: Columnwise, layout: Layout) -> Group:
    """Return the group of candidates `x` (values `cw`) under `layout`.

    When every candidate recomputes all its layers (or none), the recomputed counts
    and the distinct rows depend on the layout alone: they are kept with it.
    """
    if np.all(x.all_layers) and "rows" in layout.memo:
        rc, ranks_of, chunks_of = layout.memo["rows"]
        return Group(p, x, cw, layout, rc, ranks_of, chunks_of)
    rc = _recomputed(p, layout, x)
    rows = (rc, distinct_rows(layout.rank_comp, per_rank_sum(rc, layout.stages, layout.vpp)),
            distinct_rows(layout.comp, rc))
    if rc.ndim == 2:
        layout.memo["rows"] = rows
    return Group(p, x, cw, layout, *rows)


def rank_sums(g: Group) -> dict[str, np.ndarray]:
    """Return each distinct rank's sums of the columns memory and time read, (U, n), taken together (ranks_many)."""
    cw = g.cw
    values = {"static": cw.static, "deferred": cw.deferred, "tau": cw.tau, "dp_once": cw.dp_once,
              "tp_once": cw.tp_once}
    recomputed = {"tau": cw.tau_rec}
    if stage.exposed_micro(g.x):
        values.update(compute=cw.compute, dp_micro=cw.dp_micro)
        recomputed["compute"] = cw.compute_rec
    if not g.prepared.columns.cost_model.profile.run.reshard_params:
        values["gathered"] = cw.gathered
    if uses_device_model(g.x) and g.x.summed_grads:
        values["accumulated"] = cw.accumulated
    return g.ranks_many(values, recomputed)


def memory(g: Group, sums: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Return (S, n) bytes per rank: static (of the rank `sums`), activations (in flight), transient, total."""
    x, cw, layout, chunks = g.x, g.cw, g.layout, g.chunks_of
    per_chunk = (weighted_sum(chunks.counts, cw.act_none, chunks.spans)
                 + weighted_sum(chunks.recomputed, cw.act_delta, chunks.spans))[chunks.inverse]
    activations = per_rank_sum(in_flight(layout.stages, layout.vpp, x.micro_batches) * per_chunk, layout.stages, layout.vpp)
    static = g.spread(sums["static"])
    largest = _present_max(g.ranks_of.spans, len(g.ranks_of.counts), cw.act_none,
                           g.prepared.columns.layer_columns)
    transient, total = stage.rank_memory(x, static, activations, g.spread(largest), g.spread(_gathered(g, sums)),
                                         g.spread(sums["deferred"]))
    return {"static": static, "activations": activations, "transient": transient, "total": total}


def _gathered(g: Group, sums: dict[str, np.ndarray]) -> np.ndarray:
    """Return (U, n): the parameters ZeRO-3 holds gathered at once on each distinct rank.

    With the profile's `reshard_params` FSDP frees a layer's gathered parameters once it
    has run (FSDP2's reshard_after_forward): one layer at a time. Without it every
    layer's stay gathered from its forward until its backward: at the end of the
    forward, all of the rank's layers at once (hpdsl/cost/price/scalar.py prices the same).
    """
    if g.prepared.columns.cost_model.profile.run.reshard_params:
        return _present_max(g.ranks_of.spans, len(g.ranks_of.counts), g.cw.gathered,
                            g.prepared.columns.layer_columns)
    return sums["gathered"]  # zero outside the layer columns


def time(g: Group, sums: dict[str, np.ndarray]) -> dict[str, Any]:
    """Return per distinct rank micro-batch seconds and gradient traffic, and the modeled step time (rank `sums`)."""
    x, cw = g.x, g.cw
    pp_bytes = comm_mod.pipeline_bytes(x, g.prepared.columns.cost_model.model.hidden)
    compute = sums.get("compute")   # only where some candidate reduces every micro-batch (rank_sums)
    once, tp_once = sums["dp_once"], sums["tp_once"]
    device = uses_device_model(x)
    # A column's parameter tensors and FSDP2 units are one number for every candidate (grid.py column_static):
    # each distinct rank's sums are taken once, (U, 1), and broadcast as the (U, n) sums would be.
    t_row, once_s = stage.rank_time(x, sums["tau"], pp_bytes, compute,
                                    sums["dp_micro"] if compute is not None else 0.0, once, tp_once,
                                    sums["static"] if device else 0.0,
                                    g.ranks([v[:1] for v in cw.tensors]) if device else 0.0,
                                    g.ranks([v[:1] for v in cw.units]) if device else 0.0,
                                    sums.get("accumulated", 0.0))
    # np.add.accumulate adds every rank's time in rank order, as the scalar evaluator does.
    step = stage.step_time(x, np.add.accumulate(g.spread(t_row), axis=0)[-1], t_row.max(axis=0),
                           once_s.max(axis=0), g.layout.vpp)
    return {"time": t_row, "pp": pp_bytes, "once": once, "tp_once": tp_once, "step": step}


def details(g: Group, memory: dict[str, np.ndarray], time: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Return the per-rank breakdown (S, n) an Estimate reports: bytes by part, FLOPs, traffic, time."""
    x, cw = g.x, g.cw
    params, grads, optim = (g.spread(g.ranks(part)) for part in cw.parts)
    moved = {axis: g.ranks(cw.vol[axis], cw.vol_rec[axis]) for axis in ("tp", "cp", "ep")}
    traffic = stage.rank_traffic(x, moved, time["tp_once"], time["pp"], time["once"], g.ranks(cw.dp_micro))
    traffic = {axis: g.spread(np.broadcast_to(value, moved["tp"].shape)) for axis, value in traffic.items()}
    flops = x.micro_batches * g.ranks([f + b for f, b in zip(cw.fwd, cw.bwd)], cw.rec)
    return {"params": params, "grads": grads, "optimizer": optim, "accumulated": g.spread(g.ranks(cw.accumulated)),
            "activations": memory["activations"], "transient": memory["transient"],
            "total": memory["total"], "flops": g.spread(flops), "time": g.spread(time["time"]), **traffic}


def price_group(p: Prepared, x: Ctx, cw: Columnwise, layout: Layout, *, detail: bool,
                flops: bool) -> dict[str, Any]:
    """Return one layout group's prices: peak bytes and step time, the FLOPs (`flops`), the per-rank detail."""
    g = group(p, x, cw, layout)
    sums = rank_sums(g)
    mem, seconds = memory(g, sums), time(g, sums)
    out: dict[str, Any] = {"peak_bytes": mem["total"].max(axis=0), "peak_stage": mem["total"].argmax(axis=0),
                           "step_time_s": seconds["step"]}
    if flops:
        counts = layout.comp.sum(axis=0)
        out.update(flops_forward=x.batch * _sum_columns(counts, cw.model_fwd),
                   flops_backward=x.batch * _sum_columns(counts, cw.model_bwd),
                   flops_model=3 * x.batch * _sum_columns(counts, cw.model_mfu),
                   flops_recompute=x.batch * _sum_columns(g.rc.sum(axis=0), cw.model_rec))
    if detail:
        stages = details(g, mem, seconds)
        out["device_flops"] = stages["flops"].max(axis=0)
        out["communication"] = {axis: stages[axis].max(axis=0) for axis in comm_mod.AXES}
        out["stages"] = [{k: np.ascontiguousarray(v[:, i]) for k, v in stages.items()}
                         for i in range(mem["total"].shape[1])]
    return out


def _sum_columns(counts: np.ndarray, values: Cols) -> np.ndarray:
    """Return Σ_j counts[j]·values[j], (n,), in column order; counts (J,) or (J, n)."""
    acc = np.zeros(len(values[0]))
    for j, value in enumerate(values):
        acc = acc + counts[j] * value
    return acc
