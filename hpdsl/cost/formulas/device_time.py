"""One pricing column's FLOPs and saved bytes into seconds under the device time model.

A column's executed work splits into parameter matmuls (priced at the device's
matmul curve for the column's shard: tokens × width/tp × hidden), attention's
score matmuls (QKᵀ and A·V, at the curve for tokens × keys × head_dim) and the
memory-bound kernels around them (norms, activations, dropout, softmax, residual
adds, rotary), priced as the bytes they save for backward times the passes that
write and read them, at the device's memory bandwidth (hpdsl/cost/formulas/kernels.py).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from hpdsl.cost.formulas import xp
from hpdsl.cost.facts.casts import Casts
from hpdsl.cost.facts.columns import Column, ModelColumns
from hpdsl.cost.facts.eager import EagerWork
from hpdsl.cost.formulas.context import Ctx
from hpdsl.cost.formulas import kernels
from hpdsl.model import ops as OP

EMBEDDING_OPS = 1.0
"""Ops the embedding column dispatches: its lookup."""

OUTPUT_OPS = 3.0
"""Ops the output column dispatches: the final norm, the head's matmul and the loss."""

RECOMPUTE_HOST_SHARE = 1.0 / 3.0
"""The share of an op's forward-and-backward host time a recomputed forward dispatches again (one of its 3 kernels)."""


@attrs.frozen(eq=False)
class ColumnSeconds:
    """Seconds of one column per micro-batch: forward + backward, recompute, and the score matmuls' forward."""

    compute: Any
    recompute: Any
    scores: Any


def uses_device_model(x: Ctx) -> bool:
    """Return whether some candidate is priced by the device time model (a traced flag may be)."""
    flag = x.device_model
    if isinstance(flag, np.ndarray):
        return bool(flag.any())
    return flag if isinstance(flag, bool) else True


def column_width(column: Column, columns: ModelColumns) -> tuple[float, float]:
    """Return (width split over tp, head_dim) of a column's representative matmuls (feed-forward or vocabulary)."""
    model = columns.cost_model.model
    if column.role in ("embedding", "output"):
        return float(model.vocab), float(model.hidden // max(model.heads, 1))
    cfg = column.config
    assert cfg is not None
    width = cfg.ffn_width or cfg.hidden
    return float(max(width, cfg.hidden)), float(cfg.head_dim or cfg.hidden // max(cfg.heads, 1))


def column_ops(column: Column, x: Ctx) -> Any:
    """Return the ops one micro-batch of a column dispatches: its op vector's priced counts, gathers only under tp.

    Each is one host dispatch in the forward and its backward (the device's `op_overhead`,
    docs/cost-model.md#the-device-time-model); a tensor-parallel gather runs only where tp > 1.
    """
    if column.role == "embedding":
        return EMBEDDING_OPS + xp.where(x.tp > 1, 1.0, 0.0)
    if column.role == "output":
        return OUTPUT_OPS + xp.where(x.tp > 1, 1.0, 0.0)
    assert column.config is not None
    ops = column.config.ops
    plain = float(sum(OP.count(ops, op) for op in OP.PRICED if op != OP.GATHER))
    return plain + xp.where(x.tp > 1, float(OP.count(ops, OP.GATHER)), 0.0)


def column_seconds(column: Column, columns: ModelColumns, x: Ctx, *, fwd: Any, bwd: Any, rec: Any, scores: Any,
                   again: Any, keys: Any, saved: Any, kept: Any) -> ColumnSeconds:
    """Return one column's seconds per micro-batch: matmuls at their shape's share of peak, the rest at bandwidth.

    `scores` are the forward score FLOPs, `again` what a flash backward runs again,
    `saved` the bytes the column keeps without recompute and `kept` under the strategy's.
    """
    width, head_dim = column_width(column, columns)
    hidden = float(columns.cost_model.model.hidden)
    mm_share = kernels.machine_efficiency(x.curves, kernels.gemm_size(x.tokens, width / x.tp, hidden))
    score_work = 3 * scores + again  # forward, the backward's two matmuls per forward one, flash's again
    mm_work = fwd + bwd - score_work
    rec_scores = xp.where(x.recompute == 2, scores, rec)
    # fp8-mixed converts the layers' linears (torchao's Float8Linear, Transformer Engine); the head stays bf16.
    mm_peak = x.peak if column.role in ("embedding", "output") else x.peak_mm
    seconds = kernels.matmul_seconds(mm_work, mm_peak, mm_share)
    rec_seconds = kernels.matmul_seconds(rec - rec_scores, mm_peak, mm_share)
    # Fused kernels move the bytes saved for backward, written and read (kernels.py's passes); the eager
    # terms replace them where the candidate's device states a call_overhead (`_eager_or_fused`).
    fused = kernels.memory_seconds(saved, x.mem_bw, passes=kernels.FORWARD_PASSES + kernels.BACKWARD_PASSES)
    fused_rec = kernels.memory_seconds(saved - kept, x.mem_bw, passes=kernels.FORWARD_PASSES)
    eager = x.eager_on and column.eager is not None
    if not eager:
        seconds, rec_seconds = seconds + fused, rec_seconds + fused_rec
    score_seconds = scores * 0.0
    if not _is_zero(scores):
        # The attention kernel at its own curve where the device declares one (calibrate measures SDPA's).
        score_share = kernels.machine_efficiency(x.att_curves, kernels.gemm_size(x.tokens, keys, head_dim))
        score_seconds = kernels.matmul_seconds(scores, x.peak, score_share)
        seconds = seconds + kernels.matmul_seconds(score_work, x.peak, score_share)
        rec_seconds = rec_seconds + kernels.matmul_seconds(rec_scores, x.peak, score_share)
    if x.any_fp8 and column.casts != Casts():
        cast, cast_again = cast_bytes(column.casts, x)
        seconds = seconds + xp.where(x.fp8, cast / x.mem_bw, 0.0)
        rec_seconds = rec_seconds + xp.where(x.fp8 & (x.recompute == 2), cast_again / x.mem_bw, 0.0)
    if eager:  # what the families declare the eager modules dispatch: calls and elementwise bytes
        work, again_work = _eager_or_fused(column, x, keys, fused, fused_rec)
        seconds, rec_seconds = seconds + work, rec_seconds + again_work
    elif x.host_on:  # eager dispatch: each op's host time, beside its arithmetic (it does not overlap on a CPU)
        host = column_host(column, x)
        seconds = seconds + host
        rec_seconds = rec_seconds + xp.where(x.recompute == 2, RECOMPUTE_HOST_SHARE * host, 0.0)
    return ColumnSeconds(seconds, rec_seconds, score_seconds)


def _eager_or_fused(column: Column, x: Ctx, keys: Any, fused: Any, fused_rec: Any) -> tuple[Any, Any]:
    """Return an eager column's memory-bound and host seconds per micro-batch, and what a recompute runs again.

    Eager where the candidate's device states a call_overhead: the declared calls' host time and the bytes
    they move at eager_bandwidth. A candidate whose device states none (a grid over several devices) keeps
    the fused pricing: the saved bytes' passes, and the op vector's ops × op_overhead where stated.
    """
    assert column.eager is not None
    host = column_ops(column, x) * x.op_overhead if x.host_on else 0.0
    old = fused + host
    old_again = fused_rec + xp.where(x.recompute == 2, RECOMPUTE_HOST_SHARE * host, 0.0)
    work = column_host(column, x) + eager_bytes(column.eager, x, keys) / x.eager_bw
    again = xp.where(x.recompute == 2, RECOMPUTE_HOST_SHARE * work, 0.0)
    on = x.call_s > 0  # a grid over several devices may hold ones that state no call_overhead
    return xp.where(on, work, old), xp.where(on, again, old_again)


def column_host(column: Column, x: Ctx) -> Any:
    """Return a column's host seconds per micro-batch: its eager calls (or its op vector's ops) and DTensor's share.

    Where the device states a call_overhead and the column's families declare their eager calls, each call
    costs call_overhead, and under tp each op of the op vector adds what DTensor's dispatch adds to it
    (dtensor_op_overhead − op_overhead); otherwise each op of the op vector costs op_overhead (under tp,
    dtensor_op_overhead).
    """
    plain = column_ops(column, x) * x.op_overhead if x.host_on else 0.0
    if x.eager_on and column.eager is not None:
        eager = float(column.eager.calls) * x.call_s + column_ops(column, x) * x.dtensor_extra
        return xp.where(x.call_s > 0, eager, plain)
    return plain


def eager_bytes(work: EagerWork, x: Ctx, keys: Any) -> Any:
    """Return the bytes a column's eager elementwise calls move per micro-batch on one rank, forward and backward."""
    per_token = (float(work.split) / x.tp + float(work.sequence) / x.sp_shards + float(work.whole)
                 + float(work.per_key) * keys / x.tp + float(work.logits) / x.loss_shards)
    return x.tokens * per_token * x.compute_bytes


def cast_bytes(casts: Casts, x: Ctx) -> tuple[Any, Any]:
    """Return the bytes fp8-mixed's casts move per micro-batch and rank: forward and backward, a recomputed forward.

    Each operand (the linear's input, its output gradient) and each weight is read for
    its absolute maximum and read again to be written as fp8 (2c + 1 bytes per element
    at c bytes); the weight-gradient matmul takes the input and the output gradient,
    and the input-gradient matmul the weight, cast once more in the other layout
    (c + 1): 3c + 2 per element a step, 2c + 1 again for a recomputed forward.
    """
    c, p = x.compute_bytes, x.param_bytes
    inputs = x.tokens * (float(casts.colwise_inputs) / x.sp_shards + float(casts.inputs)
                         + float(casts.split_inputs) / x.tp)
    grads = x.tokens * (float(casts.grads) + float(casts.split_grads) / x.tp)
    weights = (float(casts.weights) / x.tp + float(casts.whole_weights)
               + float(casts.expert_weights) / (x.ep * x.etp))
    return (inputs + grads) * (3 * c + 2) + weights * (3 * p + 2), inputs * (2 * c + 1) + weights * (2 * p + 1)


def _is_zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and value == 0
