"""A bound model and one strategy into an Estimate: parameters, FLOPs, memory per stage, traffic, time.

`estimate` prices one strategy through a plan compiled from the formulas the
search runs over millions of candidates (hpdsl/cost/price/scalar.py), so the two can
never disagree (tests/property/test_scalar_pricing.py).
"""

from __future__ import annotations

from typing import Any

import attrs

from hpdsl.bound.bind import CostModel
from hpdsl.cost.facts.devices import get_device, get_machine, precision_peaks
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.facts.params import ParamReport
from hpdsl.cost.facts.precision import OPTIMIZERS, PRECISIONS, StaticWidths, static_widths
from hpdsl.cost.feasibility.reasons import require_valid
from hpdsl.cost.formulas.breakdown import step_breakdown
from hpdsl.cost.formulas.device_time import column_host
from hpdsl.cost.formulas.comm import AXES
from hpdsl.cost.formulas.context import scalar_context
from hpdsl.cost.price.grid import price_grid
from hpdsl.cost.price.prepare import prepare
from hpdsl.cost.price.scalar import OnePrice, one_of, price_one
from hpdsl.cost.price.types import Prepared
from hpdsl.model.strategy import Strategy


@attrs.frozen
class FlopReport:
    """FLOPs of one training step: executed model-wide by pass, on the busiest device, and the model convention.

    forward, backward and recompute are what the kernels execute (causal flash
    attention skips the masked half of the scores; the flash backward runs QKᵀ and
    the softmax again); `model_total` is the MFU convention (PaLM's 6N + 12·L·a·d_h·s
    per token: parameter matmuls and the full score square, min(s, w) keys per query
    for a sliding-window layer, forward and backward).
    """

    forward: float
    backward: float
    recompute: float
    per_device: float
    model_total: float = 0.0

    @property
    def total(self) -> float:
        """Return forward + backward + recompute, model-wide."""
        return self.forward + self.backward + self.recompute


@attrs.frozen
class StageMemory:
    """One pipeline rank: what it holds, in bytes, and its share of a step's work and traffic."""

    stage: int
    layers: int
    columns: dict[str, int]
    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activation_bytes: float
    transient_bytes: float
    total_bytes: float
    flops: float
    micro_batch_time_s: float
    communication: dict[str, float]


@attrs.frozen
class MemoryReport:
    """Memory per pipeline rank and the peak over ranks, against the device's capacity."""

    per_stage: tuple[StageMemory, ...]
    peak_bytes: float
    peak_stage: int
    capacity_bytes: int

    @property
    def fits(self) -> bool:
        """Return whether the peak fits the device."""
        return self.peak_bytes <= self.capacity_bytes


@attrs.frozen
class Estimate:
    """What one strategy costs a model."""

    model: str
    strategy: Strategy
    params: ParamReport
    flops: FlopReport
    memory: MemoryReport
    communication: dict[str, float]
    step_time_s: float
    tokens_per_step: int
    widths: StaticWidths = StaticWidths(2, 4, 4, 0, 2, 4)
    breakdown: dict[str, float] = attrs.field(factory=dict)  # where the step's time goes (cost/formulas/breakdown.py)

    def assumptions(self) -> dict[str, Any]:
        """Return what the estimate assumed about precision and optimizer, bytes per parameter included."""
        w = self.widths
        return {"precision": self.strategy.precision, "optimizer": self.strategy.optimizer,
                "param_bytes": w.param, "grad_bytes": w.grad, "master_bytes": w.master,
                "extra_bytes": w.extra, "optimizer_states": w.states, "optimizer_state_bytes": w.state_bytes,
                "static_bytes_per_param": w.total,
                "compute_bytes": self.strategy.compute_bytes or PRECISIONS[self.strategy.precision].compute,
                "precision_note": PRECISIONS[self.strategy.precision].note,
                "optimizer_note": OPTIMIZERS[self.strategy.optimizer].note}

    @property
    def tokens_per_s(self) -> float:
        """Return the modeled training throughput."""
        return self.tokens_per_step / self.step_time_s if self.step_time_s else 0.0

    @property
    def mfu(self) -> float:
        """Return model FLOPs utilisation: the model convention's FLOPs per second over every device's peak."""
        peak = get_device(self.strategy.device).peak_flops * self.strategy.devices
        return self.flops.model_total / (self.step_time_s * peak) if self.step_time_s else 0.0

    def to_json(self) -> dict[str, Any]:
        """Return the estimate as `hpdsl estimate --json` prints it."""
        return {
            "model": self.model,
            "strategy": attrs.asdict(self.strategy),
            "assumed": self.assumptions(),
            "machine": {**get_machine(self.strategy.device).describe(), **time_model(self.strategy)},
            "params": self.params.to_json(),
            "flops": {"forward": self.flops.forward, "backward": self.flops.backward,
                      "recompute": self.flops.recompute, "total": self.flops.total,
                      "per_device": self.flops.per_device, "model_total": self.flops.model_total},
            "mfu": self.mfu,
            "memory": {"per_stage": [_stage_json(s) for s in self.memory.per_stage],
                       "peak_bytes": self.memory.peak_bytes, "peak_stage": self.memory.peak_stage,
                       "capacity_bytes": self.memory.capacity_bytes, "fits": self.memory.fits},
            "communication": dict(self.communication),
            "step_time_s": self.step_time_s,
            "time_breakdown": dict(self.breakdown),
            "tokens_per_s": self.tokens_per_s,
        }


def time_model(strategy: Strategy) -> dict[str, Any]:
    """Return how the step time was priced: the device time model (mfu 0, the default) or a constant share of peak.

    Under the device time model it names the dtype and peak each kind of arithmetic is
    priced at: a layer's weight matmuls, and the rest (a dtype the device states no
    peak for falls back to bf16's, named here).
    """
    out: dict[str, Any] = {"time_model": "mfu" if strategy.mfu else "device", "assumed_mfu": strategy.mfu or None}
    if not strategy.mfu:
        (mm_dtype, mm_peak), (dtype, peak) = precision_peaks(strategy.device, strategy.precision)
        out.update(layer_matmul_dtype=mm_dtype, layer_matmul_peak_flops=mm_peak, compute_dtype=dtype,
                   compute_peak_flops=peak)
    return out


def _stage_json(stage: StageMemory) -> dict[str, Any]:
    out = attrs.asdict(stage)
    out["communication"] = dict(stage.communication)
    return out


def estimate(cost_model: CostModel | Prepared, strategy: Strategy) -> Estimate:
    """Price one strategy; raise InvalidStrategyError listing every reason if it cannot run.

    Priced in floats through the model's compiled plan (hpdsl/cost/price/scalar.py):
    the grid's formulas, held equal to it by tests/property/test_scalar_pricing.py.
    """
    prepared = cost_model if isinstance(cost_model, Prepared) else prepare(cost_model)
    require_valid(strategy, prepared.checks())
    strategy = effective(strategy, prepared)
    return estimate_from_price(prepared, strategy, price_one(prepared, strategy))


def grid_estimate(cost_model: CostModel | Prepared, strategy: Strategy) -> Estimate:
    """Return `estimate` as the vectorised grid prices it (a grid of one): what the search computes."""
    prepared = cost_model if isinstance(cost_model, Prepared) else prepare(cost_model)
    require_valid(strategy, prepared.checks())
    strategy = effective(strategy, prepared)
    price = price_grid(prepared, StrategyGrid.from_strategies([strategy]), detail=True)
    return estimate_from_price(prepared, strategy, one_of(price, 0))


def effective(strategy: Strategy, prepared: Prepared) -> Strategy:
    """Return `strategy` with sequence parallelism resolved: on only with tp > 1 and stated or the profile's default.

    Priced the same (sp divides nothing at tp 1), so the estimate can say what ran.
    """
    stated = strategy.sequence_parallel
    on = prepared.columns.cost_model.profile.run.shard_activations if stated is None else stated
    resolved = bool(on) and strategy.tp > 1
    return strategy if stated is resolved else strategy.with_(sequence_parallel=resolved)


def estimate_from_price(prepared: Prepared, strategy: Strategy, price: OnePrice) -> Estimate:
    """Return one strategy's price as an Estimate."""
    rows = price.stages
    plan = prepared.layout(strategy.pp, strategy.vpp, strategy.pp_split).plan
    names = prepared.columns.names
    stages = tuple(
        StageMemory(
            stage=r, layers=plan.rank_layers[r], columns={names[j]: int(n) for j, n in held},
            params_bytes=rows["params"][r], grads_bytes=rows["grads"][r], optimizer_bytes=rows["optimizer"][r],
            activation_bytes=rows["activations"][r], transient_bytes=rows["transient"][r],
            total_bytes=rows["total"][r], flops=rows["flops"][r], micro_batch_time_s=rows["time"][r],
            communication={axis: rows[axis][r] for axis in AXES})
        for r, held in enumerate(plan.rank_held))
    run = prepared.columns.cost_model.profile.run
    x = scalar_context(strategy, run)
    columns = prepared.columns.columns
    host = [sum(n * column_host(columns[j], x) for j, n in held) for held in plan.rank_held]
    return Estimate(
        model=prepared.columns.cost_model.model.name, strategy=strategy,
        params=prepared.columns.report,
        flops=FlopReport(price.flops_forward, price.flops_backward, price.flops_recompute, price.device_flops,
                         price.flops_model),
        memory=MemoryReport(stages, price.peak_bytes, price.peak_stage, get_device(strategy.device).memory_bytes),
        communication=price.communication, step_time_s=price.step_time_s,
        tokens_per_step=strategy.batch * strategy.seq_len,
        widths=static_widths(strategy.precision, strategy.optimizer, run, strategy.param_bytes),
        breakdown=step_breakdown(x, price.step_time_s, rows["time"],
                                 [{axis: rows[axis][r] for axis in AXES} for r in range(len(rows["time"]))],
                                 [rows["params"][r] + rows["grads"][r] + rows["optimizer"][r]
                                  for r in range(len(rows["time"]))], host,
                                 [sum(n * prepared.tensors[j] for j, n in held) for held in plan.rank_held],
                                 rows["accumulated"]))
