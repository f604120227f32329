"""A priced strategy's per-rank times and traffic into where its step's time goes.

The step is m·vpp chunks through the pipeline: m times the slowest rank's
micro-batch (the steady state), the fill and drain of the others (the bubble,
(Σ ranks − slowest)/vpp), then what follows the last backward (the exposed
gradient reduction, sequence parallelism's replicated-gradient all-reduce and,
under the device time model, the optimizer step). The steady state splits into
each axis's traffic at its bandwidth on the slowest rank and the compute the
rest of it is (hpdsl/cost/stage.py prices the step the same way).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hpdsl.cost.formulas.context import Ctx
from hpdsl.cost.formulas.kernels import grad_sum_seconds, optimizer_seconds

AXIS_BANDWIDTH = {"tp": "bw_tp", "cp": "bw_cp", "ep": "bw_ep", "pp": "bw_pp"}


def step_breakdown(x: Ctx, step: float, rank_times: Sequence[float],
                   rank_traffic: Sequence[Mapping[str, float]], rank_static: Sequence[float] = (),
                   rank_host: Sequence[float] = (), rank_tensors: Sequence[float] = (),
                   rank_accumulated: Sequence[float] = ()) -> dict[str, float]:
    """Return the step's seconds by part: compute, each axis's traffic, the bubble, what follows the backward.

    `rank_traffic` is each rank's bytes sent per step by axis; `rank_times` its seconds per micro-batch;
    `rank_static` its weights, gradients and optimizer states, whose optimizer step (the device time
    model's) is the `optimizer_s` share of `after_backward_s` on the rank that takes longest over it;
    `rank_host` its ops' host seconds per micro-batch (the device's op_overhead), whose steady-state
    share is the `host_s` part of `compute_s` (a full recompute's dispatches not counted); `rank_tensors`
    its parameter tensors, whose host time a step (the device's tensor_overhead) is `optimizer_tensors_s`,
    a part of `optimizer_s`. Where the backend sums gradients (not fused_grad_accumulation),
    `rank_accumulated` is the gradient bytes each micro-batch after the first adds into, whose sums
    are the `grad_sum_s` part of `after_backward_s` (hpdsl/cost/formulas/stage.py rank_time).
    """
    m, vpp = float(x.micro_batches), float(x.vpp)
    slowest = max(range(len(rank_times)), key=lambda r: rank_times[r])
    steady = m * rank_times[slowest]
    bubble = (sum(rank_times) - rank_times[slowest]) / vpp
    out = {"steady_s": steady, "bubble_s": bubble, "after_backward_s": max(step - steady - bubble, 0.0)}
    traffic = rank_traffic[slowest]
    moved = {axis: float(traffic.get(axis, 0.0)) / float(getattr(x, bw)) for axis, bw in AXIS_BANDWIDTH.items()}
    scale = min(1.0, steady / sum(moved.values())) if sum(moved.values()) > 0 else 1.0  # a ring hides behind scores
    out.update({f"{axis}_s": seconds * scale for axis, seconds in moved.items()})
    out["compute_s"] = max(steady - sum(out[f"{axis}_s"] for axis in AXIS_BANDWIDTH), 0.0)
    if x.device_model is True and any(rank_host):
        out["host_s"] = min(m * rank_host[slowest], out["compute_s"])
    if x.device_model is True and rank_static:
        tensors = list(rank_tensors) or [0.0] * len(rank_static)
        per_rank = [(optimizer_seconds(s, x.opt_bw), n * float(x.tensor_overhead)) for s, n in zip(rank_static, tensors)]
        longest = max(per_rank, key=sum)
        out["optimizer_s"] = min(sum(longest), out["after_backward_s"])
        if longest[1] > 0:
            out["optimizer_tensors_s"] = min(longest[1], out["optimizer_s"])
        if x.summed_grads and rank_accumulated and x.micro_batches > 1:
            sums = max(grad_sum_seconds(a, n, x.micro_batches, x.opt_bw, x.call_s)
                       for a, n in zip(rank_accumulated, tensors))
            out["grad_sum_s"] = min(sums, out["after_backward_s"] - out["optimizer_s"])
    return out
