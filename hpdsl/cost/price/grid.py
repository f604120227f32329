"""A cost model and a strategy grid into prices: peak bytes, FLOPs, traffic and step time per candidate.

The grid evaluator: the search prices millions of candidates through the same
expressions `estimate` compiles for one (hpdsl/cost/price/scalar.py). Every column's
values (bytes, seconds, FLOPs, traffic per layer) are arrays over the
candidates, computed once per grid; candidates are then grouped by pipeline
layout (pp, vpp, split), since a layout fixes how many layers of each column
every chunk holds, and hpdsl/cost/price/ranks.py sums each group's columns per
rank, never a Python loop per candidate. Sums over columns and stages run in a
fixed order, so a candidate's price does not depend on which grid it is priced in.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from hpdsl.bound.bind import CostModel
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.formulas import comm as comm_mod
from hpdsl.cost.formulas import flops as flop_mod
from hpdsl.cost.formulas import memory as mem
from hpdsl.cost.formulas import param_shards as shards
from hpdsl.cost.formulas import xp
from hpdsl.cost.formulas.context import LINK_FIELDS, Ctx, context
from hpdsl.cost.formulas.device_time import column_seconds, uses_device_model
from hpdsl.cost.price.prepare import prepare
from hpdsl.cost.price.ranks import price_group
from hpdsl.cost.price.types import Columnwise, GridPrice, Prepared


def shared_factors(p: Prepared, x: Ctx) -> tuple[Any, Any, Any]:
    """Return what every column's prices share: ZeRO factors, gradient-reduction factors, the output's copy."""
    return shards.static_factors(x), comm_mod.data_parallel_factors(x), _output_copy(p, x)


def _output_copy(p: Prepared, x: Ctx) -> Any:
    """Return the embedding copy the output column's rank holds: only where pp > 1."""
    return xp.where(x.pp > 1, p.output_copy, 0.0)


def columnwise(p: Prepared, x: Ctx, *, flops: bool = True, work: Work | None = None) -> Columnwise:
    """Return every per-column quantity of a grid (a column's values do not depend on the layout).

    Without `flops` the model-convention FLOPs and what only the per-rank detail reads (executed
    FLOPs, traffic by axis) are left out (empty lists): the search ranks by time and memory.
    `work` is the columns' work computed once for representatives of the candidates
    (`work_table`) and which one each candidate is: only the layout's part is computed here.
    """
    shared = shared_factors(p, x)
    if work is None:
        rows = [column_values(p, j, x, *shared, flops=flops) for j in range(p.n_columns)]
    else:
        table, inverse = work
        rows = [{**{k: v[inverse] for k, v in table[j].items()}, **column_static(p, j, x, *shared)}
                for j in range(p.n_columns)]
    flat = {k: [row[k] for row in rows] if k in rows[0] else [] for k in attrs.fields_dict(Columnwise)
            if k not in ("parts", "vol", "vol_rec")}
    params, grads, optimizer = ([row["parts"][k] for row in rows] for k in range(3))
    traffic = [row["traffic"] for row in rows if "traffic" in row]
    return Columnwise(
        parts=(params, grads, optimizer),
        vol={axis: [getattr(t, axis) for t in traffic] for axis in ("tp", "cp", "ep")},
        vol_rec={axis: [getattr(t, f"rec_{axis}") for t in traffic] for axis in ("tp", "cp", "ep")},
        **flat)


def some_columns(p: Prepared, x: Ctx, work: Work, fields: tuple[str, ...]) -> Columnwise:
    """Return a Columnwise of only `fields` (FIT_WORK arrays spread from `work`, or "static"), the rest empty.

    The search's bounds read a few quantities of every bound row: only those are computed.
    """
    table, inverse = work
    out: dict[str, Any] = {k: [] for k in attrs.fields_dict(Columnwise) if k not in ("parts", "vol", "vol_rec")}
    for k in fields:
        if k != "static":
            out[k] = [columns[k][inverse] for columns in table]
    if "static" in fields:
        factors, copy = shards.static_factors(x), _output_copy(p, x)
        out["static"] = [xp.broadcast(_static(p, j, x, factors, copy)[2], x.tokens) for j in range(p.n_columns)]
    return Columnwise(parts=([], [], []), vol={}, vol_rec={}, **out)


Work = tuple[list[dict[str, np.ndarray]], np.ndarray]
"""Per column the work arrays of some representative candidates, and per candidate its representative."""

WORK_FIELDS = ("tp", "sp_shards", "cp", "ep", "etp", "micro_batch", "seq_len", "tokens", "loss_shards",
               "compute_bytes", "softmax_bytes", "param_bytes", "flash", "hf", "eager", "cpu", "recompute",
               "all_layers", "recompute_layers", "ring", "grad_bytes", "optimizer_bytes", "achieved_flops", "peak",
               "peak_mm", "fp8", "mem_bw", "op_overhead", "call_s", "eager_bw", "dtensor_extra", "opt_bw", "device_model", "bw_tp", "bw_cp", "bw_ep", "lat_tp",
               "lat_cp", "lat_ep", "tree_tp")
"""The context arrays a column's work (column_work) may read: none depends on dp, pp, vpp or ZeRO."""

WORK_LINKS = tuple(name for name in LINK_FIELDS if name in WORK_FIELDS)
"""The link fields a context computed for representatives alone needs (context's `links`)."""


def representatives(x: Ctx, index: np.ndarray | None = None) -> Ctx:
    """Return the context of the candidates of `x` at `index` (all), its arrays outside WORK_FIELDS unset (None).

    Candidates that differ only in dp, pp, vpp and ZeRO do the same work per column
    (column_work reads WORK_FIELDS alone): a search computes it once per representative
    and spreads it (columnwise's `work`), each value the same elementwise operations on
    the same inputs. The other arrays are left unset so that a formula that came to
    read one fails loudly instead of pricing every candidate as its representative.
    """
    def pick(a: np.ndarray) -> np.ndarray:
        return a if index is None else a[index]
    arrays: dict[str, Any] = {a.name: pick(getattr(x, a.name)) if a.name in WORK_FIELDS else None
                              for a in attrs.fields(Ctx) if isinstance(getattr(x, a.name), np.ndarray)}
    curves = tuple((pick(m) if isinstance(m, np.ndarray) else m, c) for m, c in x.curves)
    att = tuple((pick(m) if isinstance(m, np.ndarray) else m, c) for m, c in x.att_curves)
    return attrs.evolve(x, curves=curves, att_curves=att, **arrays)


def work_table(p: Prepared, xu: Ctx) -> list[dict[str, np.ndarray]]:
    """Return per column the work fit pricing reads (FIT_WORK) of representatives `xu` (`representatives`)."""
    table = []
    for j in range(p.n_columns):
        row = column_work(p, j, xu, flops=False)
        table.append({k: np.asarray(row[k]) for k in FIT_WORK})
    return table


FIT_WORK = ("act_none", "act_delta", "compute", "compute_rec", "tau", "tau_rec")
"""The work arrays fit pricing (step time and peak bytes) reads."""


@attrs.define(eq=False)
class WorkMemo:
    """The columns' work (FIT_WORK) one search has computed, by work code: a cache, mutable by declaration.

    A search prices its candidates a chunk at a time, and its bounds, chunks and uneven
    splits share work codes (Space.work_codes): each code's work is computed once, by
    whichever representative comes first, and copied where it comes again (the same
    arrays a representative of the chunk would have computed: column_work reads WORK_FIELDS alone).
    Blocks of sorted codes and their work, a code in one block at most.
    """

    blocks: list[tuple[np.ndarray, list[dict[str, np.ndarray]]]] = attrs.field(factory=list)

    def add(self, codes: np.ndarray, table: list[dict[str, np.ndarray]]) -> None:
        """Keep the work `table` of `codes` (sorted, none held yet)."""
        if len(codes):
            self.blocks.append((codes, table))

    def work(self, p: Prepared, x: Ctx, same: np.ndarray) -> Work:
        """Return the work of candidates `x` by their codes `same`: what is held copied, the rest computed and kept."""
        codes, index, inverse = np.unique(same, return_index=True, return_inverse=True)
        found, sources = np.zeros(len(codes), dtype=bool), []
        for held, table in self.blocks:
            at = np.minimum(np.searchsorted(held, codes), len(held) - 1)
            hit = (held[at] == codes) & ~found
            if hit.any():
                found |= hit
                sources.append((hit, at[hit], table))
        if not found.all() or not len(codes):   # (no candidates: an empty table, as work_table gives)
            fresh = work_table(p, representatives(x, index[~found]))
            self.add(codes[~found], fresh)
            sources.append((~found, slice(None), fresh))
        if len(sources) == 1 and isinstance(sources[0][1], slice):   # nothing held: the fresh work as it is
            return sources[0][2], inverse.ravel()
        out = [{k: np.empty(len(codes), dtype=v.dtype) for k, v in column.items()} for column in sources[0][2]]
        for hit, at, table in sources:
            for target, column in zip(out, table):
                for k, v in column.items():
                    target[k][hit] = v[at]
        return out, inverse.ravel()


def column_values(p: Prepared, j: int, x: Ctx, factors: Any, dp_factors: tuple[Any, ...],
                  output_copy: Any, *, flops: bool = True) -> dict[str, Any]:
    """Return one column's arrays (n,), or floats for one strategy: bytes, seconds, FLOPs and traffic per micro-batch.

    `flops=False` leaves out the model-convention FLOPs ("model_*"), which no time or memory reads,
    and the executed FLOPs and traffic by axis, which only the per-rank detail reads.
    """
    return {**column_work(p, j, x, flops=flops), **column_static(p, j, x, factors, dp_factors, output_copy)}


def column_work(p: Prepared, j: int, x: Ctx, *, flops: bool = True) -> dict[str, Any]:
    """Return one column's work per micro-batch: saved bytes, seconds, FLOPs and traffic (none reads dp, pp or ZeRO)."""
    role = p.columns.columns[j].role
    layer, zero = role in ("layer", "mtp"), xp.zeros_like(x.tokens)
    if layer:
        none, rec = mem.recomputed_activation(p.act[j], x)
    else:
        none = rec = mem.activation(p.act[j], x)[0]
    c, keys = p.flop[j], flop_mod.executed_keys(x, p.causal[j], p.windows[j], p.chunks[j])
    fwd, again = flop_mod.device_forward(c, x, keys), flop_mod.device_flash_backward(c, x, keys)
    bwd = flop_mod.BACKWARD * fwd + again
    frec = flop_mod.device_recompute(c, x, fwd, keys) if layer else zero
    scores = flop_mod.device_scores(c, x, keys) if c.ts or c.w_ts else zero
    score = scores / x.achieved_flops if c.ts or c.w_ts else zero
    compute, compute_rec = (fwd + bwd) / x.achieved_flops, frec / x.achieved_flops
    if uses_device_model(x):  # mfu 0: the device's curve and bandwidth (cost/formulas/device_time.py)
        t = column_seconds(p.columns.columns[j], p.columns, x, fwd=fwd, bwd=bwd, rec=frec, scores=scores,
                           again=again, keys=keys, saved=none,
                           kept=rec if layer else none)
        compute = xp.where(x.device_model, t.compute, compute)
        compute_rec = xp.where(x.device_model, t.recompute, compute_rec)
        score = xp.where(x.device_model, t.scores, score) if c.ts or c.w_ts else zero
    traffic = comm_mod.layer_comm(p.comm[j], x, 3 * score, xp.where(x.recompute >= 1, score, 0.0))
    values = {
        "act_none": none, "act_delta": rec - none if layer else zero,
        "compute": compute, "compute_rec": compute_rec, "tau": compute + traffic.time,
        "tau_rec": compute_rec + traffic.rec_time if layer else zero}
    if flops:
        model_fwd = flop_mod.model_forward(c, x, keys)
        values.update(
            fwd=fwd, bwd=bwd, rec=frec, model_fwd=model_fwd,
            model_bwd=flop_mod.BACKWARD * model_fwd + flop_mod.model_flash_backward(c, x, keys),
            model_rec=flop_mod.model_recompute(c, x, keys) if layer else zero,
            model_mfu=x.seq_len * (p.model_flops[j].per_token
                             + p.model_flops[j].per_key * flop_mod.model_keys(x, p.causal[j], p.windows[j], p.chunks[j])))
    out: dict[str, Any] = {k: xp.broadcast(v, x.tokens) for k, v in values.items()}
    if flops:
        out.update(traffic=traffic)
    return out


def column_static(p: Prepared, j: int, x: Ctx, factors: Any, dp_factors: tuple[Any, ...],
                  output_copy: Any) -> dict[str, Any]:
    """Return one column's bytes and gradient traffic under the candidates' layout and ZeRO (arrays, or floats)."""
    layer, zero = p.columns.columns[j].role in ("layer", "mtp"), xp.zeros_like(x.tokens)
    dense, expert, static, parts = _static(p, j, x, factors, output_copy)
    once_dense, once_expert, micro_dense, micro_expert = dp_factors
    values = {
        "static": static, "tensors": zero + (p.tensors[j] if p.tensors else 0.0),
        "units": zero + 1.0 if layer else zero,  # hpdsl/torch/parallelize.py: fully_shard per layer
        "gathered": x.param_bytes * (dense + expert) if layer else zero,
        "deferred": x.grad_bytes * (dense + expert) - parts[1],  # unsharded gradients beyond the ZeRO-sharded ones
        # Deferred: every micro-batch's unsharded gradients add up; else ZeRO-2/3's reduce-scattered shards do.
        "accumulated": xp.where(x.deferred, x.grad_bytes * (dense + expert), parts[1]),
        "dp_once": dense * once_dense + expert * once_expert,
        "dp_micro": dense * micro_dense + expert * micro_expert,
        "tp_once": sp_grad_allreduce(p.params[j].rep, x)}
    out: dict[str, Any] = {k: xp.broadcast(v, x.tokens) for k, v in values.items()}
    out.update(parts=parts)
    return out


def _static(p: Prepared, j: int, x: Ctx, factors: Any, output_copy: Any) -> tuple[Any, Any, Any, list[Any]]:
    """Return a column's (dense, expert) parameters per device, its static bytes and their three parts."""
    role = p.columns.columns[j].role
    dense, expert = shards.device_params(p.params[j], x, output_copy if role == "output" else 0.0)
    parts = shards.static_bytes(dense, expert, factors)
    return dense, expert, parts[0] + parts[1] + parts[2], parts


def sp_grad_allreduce(replicated: float, x: Ctx) -> Any:
    """Return the bytes one device sends per step to all-reduce replicated parameters' gradients over tp.

    Under sequence parallelism each tp rank computes a replicated parameter's
    gradient from its own slice of the sequence (norms, the router, MLA's latent
    projections, a whole mixer, row-parallel biases), so the slices are summed
    over tp once per step, as Megatron does for its sequence-parallel norms.
    Without sp every rank saw the whole sequence: nothing to sum.
    """
    ring = 2 * (x.tp - 1) / x.tp
    return xp.where(x.sp_shards > 1, ring * x.grad_bytes * replicated, 0.0)


def price_grid(cost_model: CostModel | Prepared, grid: StrategyGrid, *, detail: bool = False
               ) -> GridPrice:
    """Price every candidate of a grid of valid strategies."""
    p = cost_model if isinstance(cost_model, Prepared) else prepare(cost_model)
    result = _price(p, grid, detail=detail, flops=True)
    return GridPrice(**{k: v for k, v in result.items() if k != "stages"}, stages=result.get("stages"))


def price_fit(prepared: Prepared, grid: StrategyGrid, same: np.ndarray | None = None,
              memo: WorkMemo | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Return (step time, peak bytes) of every candidate: what the search ranks by, without the FLOP counts.

    `same`, when given, is a code per candidate, equal only for candidates that differ in
    nothing but dp, pp, vpp and ZeRO (a search knows which): their columns' work is computed once,
    and with `memo` (the search's, for codes of its Space.work_codes) once for the whole search.
    """
    if not len(grid):  # nothing to price (a chunk every rule refused)
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    result = _price(prepared, grid, detail=False, flops=False, same=same, memo=memo)
    return result["step_time_s"], result["peak_bytes"]


def _price(p: Prepared, grid: StrategyGrid, *, detail: bool, flops: bool, same: np.ndarray | None = None,
           memo: WorkMemo | None = None) -> dict[str, Any]:
    """Return the prices of `grid` as arrays by name (and, with `detail`, "stages": a row per candidate).

    The grid is ordered by layout (the search's chunks already are), every
    column's values computed once for all of it (the work once per `same` code),
    and each layout's run of candidates priced through views of them.
    """
    assert flops or not detail, "the per-rank detail reads the executed FLOPs"
    n = len(grid)
    key = (grid.pp.astype(np.int64) << 40) | (grid.vpp.astype(np.int64) << 20) | grid.split_id
    order = None if bool(np.all(key[1:] >= key[:-1])) else np.argsort(key, kind="stable")
    if order is not None:
        grid, key = grid.take(order), key[order]
        same = None if same is None else same[order]
    bounds = [0, *(np.flatnonzero(key[1:] != key[:-1]) + 1).tolist(), n] if n else [0]
    result: dict[str, Any] = {}
    stages: list[dict[str, np.ndarray] | None] = [None] * n
    with np.errstate(divide="ignore", invalid="ignore"):
        x = context(grid, p.columns.cost_model.profile.run)
        work = None
        if same is not None:
            work = (memo if memo is not None else WorkMemo()).work(p, x, same)
        cw = columnwise(p, x, flops=flops, work=work)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            part = slice(lo, hi)
            layout = p.layout(int(grid.pp[lo]), int(grid.vpp[lo]), grid.splits[int(grid.split_id[lo])])
            priced = price_group(p, x.take(part), cw.take(part), layout, detail=detail, flops=flops)
            _scatter(result, priced, part if order is None else order[part], n)
            for i, row in zip(range(lo, hi) if order is None else order[part].tolist(), priced.get("stages", ())):
                stages[i] = row
    if detail:
        result["stages"] = tuple(stages)
    return result


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
