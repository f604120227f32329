"""The array-or-float protocol the pricing formulas are written against.

Every formula in hpdsl/cost/{flops,memory,comm,pricing}.py takes a Ctx whose
fields are either numpy arrays (a grid of candidates, hpdsl/cost/formulas/context.py
`context`) or plain Python floats and bools (one strategy, `scalar_context`).
Arithmetic works on both as it is; the few functions numpy adds (where,
maximum, ...) go through this module, which answers in floats when no argument
is an array, and record it when one is a traced value (hpdsl/cost/formulas/trace.py).
One source of formulas, two evaluators: the search prices
millions of candidates with numpy, `estimate` one in plain floats without
numpy's per-call overhead, and tests/property/test_scalar_pricing.py holds the
two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from hpdsl.cost.formulas import trace
from hpdsl.cost.formulas.trace import Sym

Val = Union[np.ndarray, float]
"""A quantity over the grid (an array of candidates) or of one strategy (a float)."""

_ARRAY = np.ndarray


def where(cond: Any, a: Any, b: Any) -> Any:
    """Return np.where(cond, a, b), or `a if cond else b` for a plain condition."""
    if isinstance(cond, _ARRAY):
        return np.where(cond, a, b)
    if isinstance(cond, Sym):
        return trace.where(cond, a, b)
    return a if cond else b


def maximum(a: Any, b: Any) -> Any:
    """Return the elementwise maximum (floats: the larger one; NaN as numpy propagates it)."""
    if isinstance(a, _ARRAY) or isinstance(b, _ARRAY):
        return np.maximum(a, b)
    if isinstance(a, Sym) or isinstance(b, Sym):
        return trace.maximum(a, b)
    if a != a or b != b:
        return float("nan")
    return a if a >= b else b


def minimum(a: Any, b: Any) -> Any:
    """Return the elementwise minimum (floats: the smaller one)."""
    if isinstance(a, _ARRAY) or isinstance(b, _ARRAY):
        return np.minimum(a, b)
    if isinstance(a, Sym) or isinstance(b, Sym):
        return trace.minimum(a, b)
    if a != a or b != b:
        return float("nan")
    return a if a <= b else b


def clip(a: Any, low: Any, high: Any) -> Any:
    """Return `a` clipped to [low, high]."""
    return minimum(maximum(a, low), high)


def select(conds: Sequence[Any], values: Sequence[Any], default: Any) -> Any:
    """Return np.select(conds, values, default), or the first value whose condition holds."""
    if any(isinstance(c, _ARRAY) for c in conds):
        return np.select(list(conds), list(values), default)
    for cond, value in zip(conds, values):
        if cond:
            return value
    return default


def logical_not(a: Any) -> Any:
    """Return elementwise not (`~` on a Python bool is an integer, not a negation)."""
    if isinstance(a, Sym):
        return trace.logical_not(a)
    return np.logical_not(a) if isinstance(a, _ARRAY) else not a


def cube_root(a: Any) -> Any:
    """Return a ** (1/3) as numpy's power computes it, for an array, a float and a traced value alike.

    numpy's power on an array (SIMD, AVX-512 where the CPU has it) and Python's float power (libm)
    differ in the last bit on about one value in twenty; the grid and the scalar estimate must agree
    exactly (tests/property/test_scalar_pricing.py), so both go through numpy's array loop.
    """
    if isinstance(a, _ARRAY):
        return np.power(a, 1.0 / 3.0)
    if isinstance(a, Sym):
        return trace.call("cube_root", a)
    return trace.cube_root(a)


def zeros_like(a: Any) -> Any:
    """Return zeros shaped like `a` (0.0 for a float)."""
    return np.zeros_like(a) if isinstance(a, _ARRAY) else 0.0


def ones_like(a: Any) -> Any:
    """Return ones shaped like `a` (1.0 for a float)."""
    return np.ones_like(a) if isinstance(a, _ARRAY) else 1.0


def broadcast(value: Any, like: Any) -> Any:
    """Return `value` broadcast to the shape of `like` (a float stays a float)."""
    if not isinstance(like, _ARRAY) or (isinstance(value, _ARRAY) and value.shape == like.shape):
        return value
    return np.broadcast_to(value, like.shape)


def any_(a: Any) -> bool:
    """Return whether any element (or the value) is true."""
    return bool(np.any(a)) if isinstance(a, _ARRAY) else bool(a)
