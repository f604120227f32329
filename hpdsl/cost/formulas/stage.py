"""Per-rank formulas: a pipeline rank's memory, time and traffic from its columns' sums.

Written elementwise against hpdsl/cost/formulas/xp.py's protocol, like the per-column
formulas: the grid evaluator (hpdsl/cost/price/grid.py) calls them with (n, S)
arrays of candidates × ranks and a Ctx whose fields are (n, 1); the scalar one
(hpdsl/cost/price/scalar.py) once per rank with floats. Sums and maxima over columns
and ranks are the evaluators' own (they only add and compare, in the same order).
"""

from __future__ import annotations

from typing import Any

from hpdsl.cost.formulas import xp
from hpdsl.cost.formulas.context import Ctx
from hpdsl.cost.formulas.device_time import uses_device_model
from hpdsl.cost.formulas.comm import ceil_log2
from hpdsl.cost.formulas.kernels import grad_sum_seconds, optimizer_seconds


def rank_memory(x: Ctx, static: Any, activations: Any, largest_act: Any, gathered: Any, deferred: Any = 0.0
                ) -> tuple[Any, Any]:
    """Return a rank's transient bytes and its total: full recompute re-runs the largest layer, ZeRO-3 gathers.

    `gathered` is what ZeRO-3 holds gathered at once (one layer with the profile's
    reshard_params, else all the rank's layers); nothing is gathered where ZeRO has
    nothing to shard (dp·cp and the expert data-parallel degree 1, search's canonical ZeRO).
    `deferred` is the rank's unsharded gradients beyond its ZeRO-2/3 shards, held
    until the one reduction after the last micro-batch when the run defers it.
    """
    sharded = xp.where(x.dp * x.cp * x.expert_dp > 1, gathered, 0.0)
    transient = (xp.where(x.recompute == 2, largest_act, 0.0)
                 + xp.where(x.zero == 3, sharded, 0.0)
                 + xp.where(x.deferred & (x.zero >= 2), deferred, 0.0))
    return transient, static + activations + transient


def exposed_micro(x: Ctx) -> bool:
    """Return whether any candidate reduces gradients every micro-batch or overlaps the reduction (needs compute)."""
    return xp.any_(x.zero >= 2) or x.overlapped_grad_reduce


def rank_time(x: Ctx, tau: Any, pp_bytes: Any, compute: Any | None, dp_micro: Any, once: Any,
              tp_once: Any, static: Any = 0.0, tensors: Any = 0.0, units: Any = 0.0, accumulated: Any = 0.0
              ) -> tuple[Any, Any]:
    """Return a rank's micro-batch seconds and the seconds its per-step reductions add after the last backward.

    Under the device time model (mfu 0) the optimizer step over the rank's `static`
    bytes (weights, gradients, states) follows them, memory-bound (hpdsl/cost/formulas/kernels.py),
    with its host time per parameter tensor (`tensors` of them, the device's tensor_overhead).
    Under ZeRO-3 each FSDP2 unit (the rank's `units` layers and each chunk's root) costs the
    device's shard_overhead every micro-batch, on the rank's critical path. Where the backend sums
    gradients (not fused_grad_accumulation), the sums of the micro-batches after the first over the
    rank's `accumulated` gradient bytes are added to what follows the backward: the rank that takes
    longest over them paces the step, as the slowest rank paces the steady state.
    """
    t_rank = tau + pp_bytes / x.bw_pp
    if uses_device_model(x):
        t_rank = t_rank + (units + x.vpp) * x.shard_overhead  # zero outside the device model and ZeRO-3
    micro_s, once_s = dp_micro / x.bw_dp, once / x.bw_dp
    if x.latency_on:  # message steps at the tiers' latency (docs/cost-model.md#the-device-time-model)
        t_rank = t_rank + xp.where(x.pp > 1, 2 * x.vpp * x.lat_pp, 0.0)
        micro_s, once_s = micro_s + dp_latency(x, dp_micro, once=False), once_s + dp_latency(x, once, once=True)
    if compute is not None:
        # ZeRO-2/3 reduce (and gather) every micro-batch, hidden behind its compute as far as the device overlaps.
        t_rank = t_rank + micro_s - x.comm_overlap * xp.minimum(micro_s, compute)
    if compute is not None and x.overlapped_grad_reduce:
        once_s = once_s - x.comm_overlap * xp.minimum(once_s, 2 / 3 * compute)  # hidden behind the last backward
    once_s = once_s + tp_once / x.bw_tp  # tp: after the backward, before the step: not overlapped
    if x.latency_on:
        once_s = once_s + xp.where(tp_once > 0, 2 * (x.tp - 1) * x.lat_tp, 0.0)
    if uses_device_model(x):
        once_s = once_s + xp.where(x.device_model, optimizer_seconds(static, x.opt_bw), 0.0)
        once_s = once_s + tensors * x.tensor_overhead  # zero outside the device model
        if x.summed_grads:
            sums = grad_sum_seconds(accumulated, tensors, x.micro_batches, x.opt_bw, x.call_s)
            once_s = once_s + xp.where(x.device_model, sums, 0.0)
    return t_rank, once_s


def dp_latency(x: Ctx, moved: Any, *, once: bool) -> Any:
    """Return the message steps' seconds of a data-parallel reduction that moves `moved` bytes (0: none).

    Per step (`once`): an all-reduce, 2(n − 1) ring steps or 2·ceil(log2 n) as a tree, or a
    reduce-scatter and an all-gather, 2(n − 1); per micro-batch under ZeRO-2/3: a reduce-scatter
    (n − 1), and ZeRO-3's two all-gathers. Each is one collective (gradient buckets are not counted).
    """
    n = x.dp * x.cp
    ring = 2 * (n - 1)
    if once:
        steps = xp.where((x.zero == 0) & x.tree_dp, 2 * ceil_log2(n), ring)
    else:
        steps = (n - 1) * xp.where(x.zero == 3, 3.0, 1.0)
    return xp.where(moved > 0, steps * x.lat_dp, 0.0)


def step_time(x: Ctx, sum_time: Any, max_time: Any, max_once: Any, vpp: int) -> Any:
    """Return the step time: 1F1B over m·vpp chunks (the slowest rank paces the steady state) plus the reductions."""
    return (sum_time + (x.micro_batches * vpp - 1) * max_time) / vpp + max_once


def rank_traffic(x: Ctx, moved: dict[str, Any], tp_once: Any, pp_bytes: Any, once: Any, dp_micro: Any
                 ) -> dict[str, Any]:
    """Return a rank's bytes sent per step by axis: per micro-batch volumes times m, plus the per-step ones."""
    out = {axis: x.micro_batches * moved[axis] for axis in ("tp", "cp", "ep")}
    out["tp"] = out["tp"] + tp_once
    out["pp"] = x.micro_batches * pp_bytes
    out["dp"] = once + x.micro_batches * dp_micro
    return out
