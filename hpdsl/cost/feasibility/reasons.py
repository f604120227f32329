"""One strategy against a model into every reason it cannot run it, through the rules compiled once per shape."""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable
from typing import Any

import attrs

from hpdsl.bound.bind import CostModel
from hpdsl.cost.facts.bounds import bound_reasons
from hpdsl.cost.facts.columns import ModelColumns, model_columns
from hpdsl.cost.facts.strategy import InvalidStrategyError, Strategy, TRACED, codes_of
from hpdsl.cost.formulas.trace import compile_plan
from hpdsl.cost.feasibility.rules import Rule, rules
from hpdsl.cost.feasibility.shape import FamilyRequire, Shape, model_shape, require_refuses
from hpdsl.ir.conditions import names_in
from hpdsl.model.axes import CONDITION_AXES


def strategy_reasons(strategy: Strategy, cost_model: CostModel | ModelColumns) -> tuple[str, ...]:
    """Return every reason one strategy cannot run the model, in rule order.

    The same predicates the grid runs, traced once per model and per strategy
    shape (its non-numeric choices) into a compiled check (hpdsl/cost/formulas/trace.py);
    a family's requires are judged on the strategy's axis sizes directly. A
    number past its bound (hpdsl/cost/facts/bounds.py) is reported alone: the rules'
    int64 products could wrap on it.
    """
    bounds = bound_reasons(strategy)
    if bounds:
        return bounds
    columns = cost_model if isinstance(cost_model, ModelColumns) else model_columns(cost_model)
    checks = _checks(columns)
    split = tuple(strategy.pp_split) if strategy.pp_split is not None else None
    key = (split, _fixed_of(strategy))
    entry = checks.plans.get(key)
    values = [0 if value is None else value for value in _traced_of(strategy)]
    if entry is None:  # the first of its shape: the rules on plain values; the second compiles them
        checks.plans[key] = 1
        flags = _judge(checks, strategy, split)(*values)
    else:
        if not callable(entry):
            entry = checks.plans[key] = compile_plan(_judge(checks, strategy, split), TRACED, "check")
        flags = entry(*values)
    reasons = [rule.message(strategy, checks.shape) for rule, flag in zip(checks.plain, flags) if flag]
    if checks.requires and all(getattr(strategy, axis) >= 1 for axis in CONDITION_AXES):
        sizes = {axis: int(getattr(strategy, axis)) for axis in CONDITION_AXES}  # else positivity reports it
        reasons += [message for message, refuses in checks.requires if refuses(sizes)]
    return tuple(reasons)


_fixed_of = operator.attrgetter(*(a.name for a in attrs.fields(Strategy) if a.name not in TRACED + ("pp_split",)))
"""The fields that key a compiled check (with the split): its codes are constants in it."""


def _judge(checks: _Checks, strategy: Strategy, split: tuple[int, ...] | None) -> Callable[..., list[Any]]:
    """Return the plain rules as a function of the traced fields (values or Syms), the rest fixed."""
    fixed = {name: value for name, value in codes_of(strategy, 0 if split is None else 1).items()
             if name not in TRACED}

    def judge(*values: Any) -> list[Any]:
        one = _One({**fixed, **dict(zip(TRACED, values))}, (None, split))
        return [rule.bad(one, checks.shape) for rule in checks.plain]

    return judge


_traced_of = operator.attrgetter(*TRACED)


@attrs.frozen(eq=False)
class _One:
    """One strategy's grid codes as attributes: what a rule reads, for one candidate."""

    arrays: dict[str, Any]
    splits: tuple[tuple[int, ...] | None, ...]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.arrays[name]
        except KeyError:
            raise AttributeError(name) from None


@attrs.frozen(eq=False)
class _Checks:
    """A model's rules, split into traceable predicates and family requires, and its compiled checks."""

    shape: Shape
    plain: tuple[Rule, ...]
    requires: tuple[tuple[str, Callable[[dict[str, int]], bool]], ...]
    plans: dict[tuple[Any, ...], Any] = attrs.field(factory=dict)  # compiled checks, or 1: seen once


_CHECKS: weakref.WeakKeyDictionary[ModelColumns, _Checks] = weakref.WeakKeyDictionary()


def _checks(columns: ModelColumns) -> _Checks:
    found = _CHECKS.get(columns)
    if found is None:
        shape = model_shape(columns)
        plain = tuple(rule for rule in rules(shape) if not rule.require)
        found = _CHECKS[columns] = _Checks(shape, plain, tuple(
            (f"{r.role}: family '{r.family.name}': {r.require.message}", _require_check(r))
            for r in shape.requires))
    return found


def _require_check(required: FamilyRequire) -> Callable[[dict[str, int]], bool]:
    """Return whether a require refuses the given axis sizes, judged once per distinct sizes it reads."""
    family, require, selectors = required.family, required.require, dict(required.selectors)
    names = names_in(require.condition)
    read = tuple(a for a in CONDITION_AXES if a in names or (a == family.parallel and "parallel" in names))
    memo: dict[tuple[int, ...], bool] = {}

    def refuses(sizes: dict[str, int]) -> bool:
        row = tuple(sizes[axis] for axis in read)
        if row not in memo:
            memo[row] = require_refuses(family, require, dict(zip(read, row, strict=True)), selectors)
        return memo[row]

    return refuses


def validate_strategy(strategy: Strategy, cost_model: Any) -> tuple[str, ...]:
    """Return every reason `strategy` cannot run `cost_model` (empty: it can)."""
    return strategy_reasons(strategy, cost_model)


def require_valid(strategy: Strategy, cost_model: Any) -> None:
    """Raise InvalidStrategyError listing every reason if `strategy` cannot run `cost_model`."""
    reasons = validate_strategy(strategy, cost_model)
    if reasons:
        name = getattr(cost_model, "cost_model", cost_model).model.name
        listed = "\n".join(f"  - {reason}" for reason in reasons)
        raise InvalidStrategyError(f"the strategy cannot run {name}:\n{listed}", reasons)
