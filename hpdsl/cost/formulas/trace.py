"""Formulas traced once into straight-line Python: the per-model compiled plan of the scalar estimate.

The pricing formulas are written against hpdsl/cost/formulas/xp.py's protocol. Run on
`Sym` inputs they record every operation instead of computing it; `compile_plan`
emits the recording as one Python function of the inputs (constants folded,
each intermediate a local), so pricing one strategy is one call of a few
hundred float operations, with no dispatch and no dicts (numpy only for the one
function whose float and array results differ, `cube_root`). Branches on
what the plan is keyed by (the strategy's discrete choices) are taken while
tracing; a comparison of two traced values becomes a conditional expression.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Num = Any  # a Sym, or a Python number folded into the code as a constant


class Tape:
    """The statements a trace records, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.seen: dict[str, Sym] = {}

    def emit(self, expression: str) -> Sym:
        """Record `expression` as a new local and return it (the same expression twice: one local)."""
        known = self.seen.get(expression)
        if known is not None:
            return known
        name = f"v{len(self.lines)}"
        self.lines.append(f"    {name} = {expression}")
        self.seen[expression] = sym = Sym(self, name)
        return sym


def _code(value: Num) -> str:
    if isinstance(value, Sym):
        return value.name
    if hasattr(value, "item"):  # a numpy scalar a concrete rule computed
        value = value.item()
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, (int, float)):
        text = repr(float(value)) if isinstance(value, float) else repr(value)
        return f"float('{text}')" if text in ("inf", "-inf", "nan") else f"({text})"
    raise TypeError(f"cannot trace a {type(value).__name__}")


def _tape(a: Num, b: Num) -> Tape:
    return a.tape if isinstance(a, Sym) else b.tape


class Sym:
    """A traced value: a local of the function being recorded."""

    __slots__ = ("tape", "name")

    def __init__(self, tape: Tape, name: str) -> None:
        self.tape, self.name = tape, name

    def _op(self, op: str, other: Num, reflected: bool = False) -> Num:
        left, right = (other, self) if reflected else (self, other)
        folded = _fold(op, left, right)
        if folded is not None:
            return folded
        return self.tape.emit(f"{_code(left)} {op} {_code(right)}")

    def __add__(self, o: Num) -> Num: return self._op("+", o)
    def __radd__(self, o: Num) -> Num: return self._op("+", o, True)
    def __sub__(self, o: Num) -> Num: return self._op("-", o)
    def __rsub__(self, o: Num) -> Num: return self._op("-", o, True)
    def __mul__(self, o: Num) -> Num: return self._op("*", o)
    def __rmul__(self, o: Num) -> Num: return self._op("*", o, True)
    def __truediv__(self, o: Num) -> Num: return self._op("/", o)
    def __rtruediv__(self, o: Num) -> Num: return self._op("/", o, True)
    def __floordiv__(self, o: Num) -> Num: return self._op("//", o)
    def __rfloordiv__(self, o: Num) -> Num: return self._op("//", o, True)
    def __pow__(self, o: Num) -> Num: return self._op("**", o)
    def __rpow__(self, o: Num) -> Num: return self._op("**", o, True)
    def __mod__(self, o: Num) -> Num: return self._op("%", o)
    def __rmod__(self, o: Num) -> Num: return self._op("%", o, True)
    def __lt__(self, o: Num) -> Num: return self._op("<", o)
    def __le__(self, o: Num) -> Num: return self._op("<=", o)
    def __gt__(self, o: Num) -> Num: return self._op(">", o)
    def __ge__(self, o: Num) -> Num: return self._op(">=", o)
    def __eq__(self, o: object) -> Any:
        return self._op("==", o)

    def __ne__(self, o: object) -> Any:
        return self._op("!=", o)

    __hash__ = object.__hash__
    def __and__(self, o: Num) -> Num: return self._op("and", o)
    def __rand__(self, o: Num) -> Num: return self._op("and", o, True)
    def __or__(self, o: Num) -> Num: return self._op("or", o)
    def __ror__(self, o: Num) -> Num: return self._op("or", o, True)
    def __neg__(self) -> Sym: return self.tape.emit(f"-{self.name}")
    def __invert__(self) -> Sym:
        raise TypeError("~ on a traced value: use hpdsl.cost.formulas.xp.logical_not")

    def __bool__(self) -> bool:
        raise TypeError("a traced value has no truth value while tracing: key the plan by it")


def _fold(op: str, left: Num, right: Num) -> Num | None:
    """Return the value of an operation with a neutral or absorbing constant, without recording it.

    Exact for the finite values pricing sees (x·1, x/1, x±0 are x; 0·x and 0/x are 0):
    a column without a term (a zero coefficient) costs nothing in the plan.
    """
    constant = not isinstance(right, Sym) and not isinstance(right, bool)
    if constant and ((op in ("*", "/") and right == 1) or (op in ("+", "-") and right == 0)):
        return left
    lead = not isinstance(left, Sym) and not isinstance(left, bool)
    if lead and op == "+" and left == 0:
        return right
    if lead and op == "*" and left == 1:
        return right
    if op in ("*", "/") and lead and left == 0:
        return 0.0
    if op == "*" and constant and right == 0:
        return 0.0
    return None


def where(cond: Num, a: Num, b: Num) -> Num:
    """Return the conditional expression `a if cond else b` (cond traced)."""
    return _tape(cond, a if isinstance(a, Sym) else b).emit(f"{_code(a)} if {cond.name} else {_code(b)}")


def maximum(a: Num, b: Num) -> Num:
    """Return the larger (NaN as numpy: propagated)."""
    x, y = _code(a), _code(b)  # numpy's maximum: NaN propagates (x != x is NaN)
    return _tape(a, b).emit(f"{x} if ({x} >= {y} or {x} != {x}) else {y}")


def minimum(a: Num, b: Num) -> Num:
    """Return the smaller (NaN propagated)."""
    x, y = _code(a), _code(b)
    return _tape(a, b).emit(f"{x} if ({x} <= {y} or {x} != {x}) else {y}")


def logical_not(a: Sym) -> Sym:
    """Return `not a`."""
    return a.tape.emit(f"not {a.name}")


def cube_root(value: float) -> float:
    """Return value ** (1/3) by numpy's array loop, the one the grid evaluator runs (not libm's pow)."""
    return float(np.power(np.array([value], dtype=np.float64), 1.0 / 3.0)[0])


FUNCTIONS: dict[str, Callable[[float], float]] = {"cube_root": cube_root}
"""The functions a plan may call: a formula's float function that must match its array one bit for bit."""


def call(function: str, a: Sym) -> Sym:
    """Return `function(a)` recorded: a call of one of FUNCTIONS."""
    assert function in FUNCTIONS, function
    return a.tape.emit(f"{function}({a.name})")


def compile_plan(fn: Callable[..., Any], names: Sequence[str], label: str = "plan") -> Callable[..., Any]:
    """Return `fn` traced on one Sym per name and compiled: a function of those inputs, same nested outputs."""
    tape = Tape()
    inputs = [Sym(tape, name) for name in names]
    out = fn(*inputs)
    source = "\n".join([f"def {label}({', '.join(names)}):", *tape.lines,
                        f"    return {_render(out)}"])
    namespace: dict[str, Any] = dict(FUNCTIONS)
    exec(compile(source, f"<hpdsl plan {label}>", "exec"), namespace)  # noqa: S102 - code we generated
    plan = namespace[label]
    plan.source = source
    return plan


def _render(value: Any) -> str:
    """Return Python source building `value` (nested tuples, lists and dicts of traced values or numbers)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + "".join(f"{_render(v)}, " for v in value) + ")"
    if value is None:
        return "None"
    return _code(value)
