"""Device facts and a column's work into seconds: matmuls at their shape's efficiency, the rest at bandwidth.

Pure functions written against hpdsl/cost/xp.py's protocol, so the grid
evaluator calls them with arrays over candidates and the scalar one (traced,
hpdsl/cost/trace.py) with floats: only + - * /, where and xp.cube_root (curve_efficiency
has an array path: the same operations, on each size's segment only). The terms are
described in docs/cost-model.md#the-device-time-model.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from hpdsl.cost.formulas import xp

Curve = tuple[tuple[float, float], ...]
"""A device's matmul curve: (size, share of peak) points, sizes rising; size is (m·n·k)^(1/3)."""

FORWARD_PASSES = 2.0
"""Bytes an elementwise forward moves per byte it saves for backward: the kernel writes it, the next reads it."""

BACKWARD_PASSES = 4.0
"""Bytes the backward moves per saved byte: it reads the tensor and the incoming gradient, writes two gradients."""

OPTIMIZER_PASSES = 2.0
"""The optimizer step reads and writes every byte of a rank's weights, gradients and states once."""

SUM_PASSES = 3.0
"""A gradient sum reads the accumulated gradient and the micro-batch's, and writes their sum."""


def curve_efficiency(curve: Curve, size: Any) -> Any:
    """Return the share of peak at `size`: piecewise linear between points, proportional below the first, flat above."""
    if isinstance(size, np.ndarray) and len(curve) > 1:
        return _curve_array(curve, size)
    first_size, first = curve[0]
    share = first * size / first_size
    for (s0, e0), (s1, e1) in zip(curve, curve[1:]):
        share = xp.where(size > s0, e0 + (e1 - e0) * (size - s0) / (s1 - s0), share)
    return xp.where(size > curve[-1][0], curve[-1][1], share)


def _curve_array(curve: Curve, size: np.ndarray) -> np.ndarray:
    """Return curve_efficiency over an array: each size's segment found once, the same operations on it.

    The segment of a size is the last whose start is below it (where the loop of
    curve_efficiency leaves it); its share is e0 + (e1 − e0)·(size − s0)/(s1 − s0) in that order.
    """
    sizes, shares, rises, runs = _segments(curve)
    above = np.searchsorted(sizes[:-1], size, side="left")   # segment starts below each size
    at = np.maximum(above - 1, 0)
    rise, run = rises[at], runs[at]
    share = np.where(above > 0, shares[at] + rise * (size - sizes[at]) / run, shares[0] * size / sizes[0])
    return np.where(size > sizes[-1], shares[-1], share)


@cache
def _segments(curve: Curve) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return a curve's sizes, shares, and each segment's rise and run: the same differences, taken once per curve."""
    points = np.asarray(curve, dtype=np.float64)
    sizes, shares = points[:, 0], points[:, 1]
    out = sizes, shares, shares[1:] - shares[:-1], sizes[1:] - sizes[:-1]
    for array in out:
        array.setflags(write=False)  # cached: shared by every call
    return out


def machine_efficiency(curves: Sequence[tuple[Any, Curve]], size: Any) -> Any:
    """Return each candidate's matmul share of peak: the curve of its device (`curves`: (mask, curve) pairs)."""
    if len(curves) == 1:
        return curve_efficiency(curves[0][1], size)
    share = curve_efficiency(curves[0][1], size)
    for mask, curve in curves[1:]:
        share = xp.where(mask, curve_efficiency(curve, size), share)
    return share


def gemm_size(m: Any, n: Any, k: Any) -> Any:
    """Return a matmul's size (m·n·k)^(1/3), the axis its device's curve is drawn over."""
    return xp.cube_root(m * n * k)


def matmul_seconds(flops: Any, peak: Any, share: Any) -> Any:
    """Return the seconds of `flops` matmul work at `share` of `peak` FLOP/s."""
    return flops / (peak * share)


def memory_seconds(saved_bytes: Any, bandwidth: Any, *, passes: float) -> Any:
    """Return the seconds elementwise kernels take to move `passes` times `saved_bytes` at `bandwidth` bytes/s."""
    return passes * saved_bytes / bandwidth


def optimizer_seconds(static_bytes: Any, bandwidth: Any) -> Any:
    """Return the seconds one optimizer step takes over a rank's weights, gradients and states (memory-bound)."""
    return OPTIMIZER_PASSES * static_bytes / bandwidth


def grad_sum_seconds(accumulated: Any, tensors: Any, micro_batches: Any, bandwidth: Any, call_s: Any) -> Any:
    """Return a step's gradient sums: each micro-batch after the first adds into the `accumulated` bytes.

    autograd's AccumulateGrad (or FSDP2, into its sharded gradients) adds each of the rank's
    `tensors` parameter gradients in place: one call per tensor (`call_s` each, an eager device's
    call overhead) and SUM_PASSES of the bytes at `bandwidth`.
    """
    return (micro_batches - 1) * (SUM_PASSES * accumulated / bandwidth + tensors * call_s)
