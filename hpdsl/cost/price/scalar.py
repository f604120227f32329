"""One strategy priced in plain Python floats through the grid's own formulas.

The per-column formulas (hpdsl/cost/formulas/flops.py, memory.py, comm.py, through
pricing.column_values) and the per-rank ones (hpdsl/cost/formulas/stage.py) are written
against hpdsl/cost/formulas/xp.py's array-or-float protocol; here they run on a Ctx of
floats (context.scalar_context), and the sums over a layout's columns and
ranks are Python loops over its non-zero counts (Layout.plan), in the order
the grid sums them. No numpy call per strategy: `estimate` costs tens of
microseconds, where a grid of one paid numpy's per-call overhead about 1,700
times. tests/property/test_scalar_pricing.py holds the two evaluators equal.
"""

from __future__ import annotations

import operator
from typing import Any

import attrs
import numpy as np

from hpdsl.cost.formulas import stage

from hpdsl.cost.facts.grid import TRACED
from hpdsl.cost.formulas import xp
from hpdsl.cost.formulas.comm import AXES, pipeline_bytes
from hpdsl.cost.formulas.context import Ctx, scalar_context
from hpdsl.cost.formulas.trace import compile_plan
from hpdsl.cost.price.grid import column_values, shared_factors
from hpdsl.cost.price.pipeline_layout import Layout, in_flight_at
from hpdsl.cost.price.types import GridPrice, Prepared
from hpdsl.model.strategy import Strategy

STAGE_KEYS = ("params", "grads", "optimizer", "accumulated", "activations", "transient", "total", "flops", "time",
              *AXES)


@attrs.frozen(eq=False)
class OnePrice:
    """One strategy's price: what GridPrice holds for one candidate, per-rank values as lists."""

    peak_bytes: float
    peak_stage: int
    step_time_s: float
    flops_forward: float
    flops_backward: float
    flops_recompute: float
    flops_model: float
    device_flops: float
    communication: dict[str, float]
    stages: dict[str, list[float]]


def one_of(price: GridPrice, i: int) -> OnePrice:
    """Return candidate `i` of a grid priced with detail, as a OnePrice."""
    assert price.stages is not None and price.device_flops is not None and price.communication is not None
    rows = price.stages[i]
    assert rows is not None
    return OnePrice(
        float(price.peak_bytes[i]), int(price.peak_stage[i]), float(price.step_time_s[i]),
        float(price.flops_forward[i]), float(price.flops_backward[i]), float(price.flops_recompute[i]),
        float(price.flops_model[i]), float(price.device_flops[i]),
        {axis: float(price.communication[axis][i]) for axis in AXES},
        {key: [float(v) for v in rows[key]] for key in STAGE_KEYS})


plan_key = operator.attrgetter(*(f.name for f in attrs.fields(Strategy) if f.name not in TRACED))
"""What selects a strategy's compiled plan: every field the plan does not take as an input.

Derived from the class, so a new Strategy field can never reuse a plan priced without it."""


PLAN_CHUNKS = 512
"""The most pipeline chunks (pp·vpp) a compiled plan is made for: a plan is straight-line code per rank,
and compiling one for tens of thousands of ranks would take longer than pricing on floats ever does."""


def price_one(p: Prepared, strategy: Strategy) -> OnePrice:
    """Price one valid strategy (its sequence parallelism resolved) through the model's compiled plan.

    The first strategy of a shape is priced on floats (about 100 us); the second
    compiles the shape's plan (milliseconds, once), which prices every later one in
    tens of microseconds: a one-off estimate never pays for a compilation.
    """
    if strategy.pp * strategy.vpp > PLAN_CHUNKS:
        return price_floats(p, strategy)
    key = plan_key(strategy)
    plan = p.cache.plans.get(key)
    if plan is None:
        if key not in p.cache.seen:
            p.cache.seen.add(key)
            return price_floats(p, strategy)
        plan = p.cache.plans[key] = compile_plan(
            lambda *values: _priced(p, strategy.with_(**dict(zip(TRACED, values)))), TRACED)
    s = strategy
    return _assemble(plan(float(s.tp), float(s.cp), float(s.ep), float(s.etp), float(s.dp),
                          float(s.micro_batch), float(s.seq_len), s.global_batch or 0, s.mfu))


def price_floats(p: Prepared, strategy: Strategy) -> OnePrice:
    """Price one valid strategy by running the formulas on floats, without a plan (what the plan records)."""
    return _assemble(_priced(p, strategy))


def _priced(p: Prepared, strategy: Strategy) -> dict[str, Any]:
    """Return the traced (or float) prices of one strategy: per-rank lists and per-step totals."""
    x = scalar_context(strategy, p.columns.cost_model.profile.run)
    layout = p.layout(strategy.pp, strategy.vpp, strategy.pp_split)
    shared = shared_factors(p, x)
    rows = [_flat(column_values(p, j, x, *shared)) for j in range(p.n_columns)]
    return _Ranks(p, x, layout, rows).price()


def _assemble(out: dict[str, Any]) -> OnePrice:
    """Return a OnePrice from a plan's output: the maxima and the peak rank."""
    stages = out["stages"]
    totals = stages["total"]
    peak = max(totals)
    return OnePrice(peak, totals.index(peak), out["step"], out["forward"], out["backward"], out["recompute"],
                    out["model"], max(stages["flops"]), {axis: max(stages[axis]) for axis in AXES}, stages)


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """Return a column's values with its parts and traffic under flat keys."""
    row["param_bytes"], row["grad_bytes"], row["optimizer_bytes"] = row["parts"]
    traffic = row["traffic"]
    for axis in ("tp", "cp", "ep"):
        row[f"vol_{axis}"], row[f"vol_rec_{axis}"] = getattr(traffic, axis), getattr(traffic, f"rec_{axis}")
    row["flops_step"] = row["fwd"] + row["bwd"]
    return row


class _Ranks:
    """Sums over one layout's ranks of one strategy's per-column floats."""

    def __init__(self, p: Prepared, x: Ctx, layout: Layout, rows: list[dict[str, Any]]) -> None:
        self.p, self.x, self.layout, self.rows = p, x, layout, rows
        self.plan = layout.plan
        self.rc = self._recomputed()
        S, chunks = layout.stages, layout.chunks
        self.rc_rank = [self._chunk_sum([self.rc[c] for c in range(r, chunks, S)]) for r in range(S)]

    def _recomputed(self) -> list[list[float]]:
        """Return recomputed layers per chunk and column (pricing._recomputed for one strategy)."""
        n = self.p.n_columns
        layer = set(self.p.columns.layer_columns)
        if self.x.all_layers:
            return [[count if j in layer else 0.0 for j, count in self._dense(held, n)]
                    for held in self.plan.chunk_held]
        limit = int(self.x.recompute_layers)
        first = self.layout.first_layers(np.minimum(limit, self.layout.chunk_layers)[:, None])[:, 0]
        return [[float(v) for v in row] for row in first.tolist()]

    @staticmethod
    def _dense(held: tuple[tuple[int, float], ...], n: int) -> list[tuple[int, float]]:
        counts = [0.0] * n
        for j, count in held:
            counts[j] = count
        return list(enumerate(counts))

    @staticmethod
    def _chunk_sum(chunks: list[list[float]]) -> list[float]:
        acc = chunks[0]
        for more in chunks[1:]:
            acc = [a + b for a, b in zip(acc, more)]
        return acc

    def ranks(self, key: str, rec: str | None = None) -> list[float]:
        """Return per rank Σ_j count·rows[j][key] (+ Σ_j recomputed·rows[j][rec]), in column order."""
        out = []
        for r, held in enumerate(self.plan.rank_held):
            acc = 0.0
            for j, count in held:
                acc = acc + count * self.rows[j][key]
            if rec is not None:
                more, rc = 0.0, self.rc_rank[r]
                for j, _count in held:
                    more = more + rc[j] * self.rows[j][rec]
                acc = acc + more
            out.append(acc)
        return out

    def _largest(self, key: str) -> list[float]:
        layers = self.p.columns.layer_columns
        out = []
        for held in self.plan.rank_held:
            acc = 0.0
            present = {j for j, _ in held}
            for j in layers:
                if j in present:
                    acc = xp.maximum(acc, self.rows[j][key])
            out.append(acc)
        return out

    def _activations(self) -> list[float]:
        S, v, x = self.layout.stages, self.layout.vpp, self.x
        per_chunk = []
        for c, held in enumerate(self.plan.chunk_held):
            kept = delta = 0.0
            for j, count in held:
                kept = kept + count * self.rows[j]["act_none"]
            for j, _count in held:
                delta = delta + self.rc[c][j] * self.rows[j]["act_delta"]
            per_chunk.append(kept + delta)
        weighted = [in_flight_at(S, v, c % S, c // S, x.micro_batches) * per_chunk[c] for c in range(S * v)]
        return self._chunk_sum([weighted[pos * S:(pos + 1) * S] for pos in range(v)])

    def price(self) -> dict[str, Any]:
        """Return the strategy's per-rank breakdown and per-step totals."""
        p, x, layout, rows = self.p, self.x, self.layout, self.rows
        S, v = layout.stages, layout.vpp
        static, act = self.ranks("static"), self._activations()
        # ZeRO-3 holds one layer gathered with the profile's reshard_params, else all of the rank's.
        gathered = (self._largest("gathered") if p.columns.cost_model.profile.run.reshard_params
                    else self.ranks("gathered"))
        memory = [stage.rank_memory(x, *values) for values in
                  zip(static, act, self._largest("act_none"), gathered, self.ranks("deferred"))]
        pp_bytes = pipeline_bytes(x, p.columns.cost_model.model.hidden)
        compute = self.ranks("compute", "compute_rec") if stage.exposed_micro(x) else [None] * S
        once, tp_once, micro = self.ranks("dp_once"), self.ranks("tp_once"), self.ranks("dp_micro")
        times = [stage.rank_time(x, tau, pp_bytes, c, m, o, t, st, n, u, a) for tau, c, m, o, t, st, n, u, a in
                 zip(self.ranks("tau", "tau_rec"), compute, micro, once, tp_once, static, self.ranks("tensors"),
                     self.ranks("units"), self.ranks("accumulated"))]
        t_rank = [t for t, _ in times]
        step = stage.step_time(x, _sequential(t_rank), _largest(t_rank), _largest([o for _, o in times]), v)
        moved = {axis: self.ranks(f"vol_{axis}", f"vol_rec_{axis}") for axis in ("tp", "cp", "ep")}
        traffic = [stage.rank_traffic(x, {a: moved[a][r] for a in moved}, tp_once[r], pp_bytes, once[r], micro[r])
                   for r in range(S)]
        stages = {"params": self.ranks("param_bytes"), "grads": self.ranks("grad_bytes"),
                  "optimizer": self.ranks("optimizer_bytes"), "accumulated": self.ranks("accumulated"),
                  "activations": act,
                  "transient": [t for t, _ in memory], "total": [total for _, total in memory],
                  "flops": [x.micro_batches * f for f in self.ranks("flops_step", "rec")], "time": t_rank,
                  **{axis: [row[axis] for row in traffic] for axis in AXES}}
        counts, rc_total = self.plan.totals, self._chunk_sum(self.rc)
        return {"stages": stages, "step": step,
                "forward": x.batch * _columns(counts, rows, "model_fwd"),
                "backward": x.batch * _columns(counts, rows, "model_bwd"),
                "recompute": x.batch * _columns(rc_total, rows, "model_rec"),
                "model": 3 * x.batch * _columns(counts, rows, "model_mfu")}


def _largest(values: list[Any]) -> Any:
    acc = values[0]
    for value in values[1:]:
        acc = xp.maximum(acc, value)
    return acc


def _sequential(values: list[float]) -> float:
    acc = 0.0
    for value in values:
        acc = acc + value
    return acc


def _columns(counts: tuple[float, ...] | list[float], rows: list[dict[str, Any]], key: str) -> float:
    """Return Σ_j counts[j]·rows[j][key] over every column, in column order (pricing._sum_columns)."""
    acc = 0.0
    for j, row in enumerate(rows):
        acc = acc + counts[j] * row[key]
    return acc
