"""One strategy against a model into every reason it cannot run it, through the rules compiled once per shape."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import attrs

from hpdsl.bound.bind import CostModel
from hpdsl.cost.facts.bounds import bound_reasons
from hpdsl.cost.facts.columns import ModelColumns, model_columns
from hpdsl.cost.facts.grid import TRACED, codes_of
from hpdsl.cost.feasibility.problems import InvalidStrategyError, Problem
from hpdsl.cost.feasibility.rules import Rule, rules
from hpdsl.cost.feasibility.shape import FamilyRequire, Shape, model_shape, require_refuses
from hpdsl.cost.formulas.trace import compile_plan
from hpdsl.ir.conditions import names_in
from hpdsl.model.axes import CONDITION_AXES
from hpdsl.model.strategy import Strategy


def strategy_problems(strategy: Strategy, model: CostModel | ModelColumns | CheckCache) -> tuple[Problem, ...]:
    """Return every problem that keeps one strategy from running the model, in rule order.

    The same predicates the grid runs, traced once per model and per strategy
    shape (its non-numeric choices) into a compiled check (hpdsl/cost/formulas/trace.py);
    a family's requires are judged on the strategy's axis sizes directly. A
    number past its bound (hpdsl/cost/facts/bounds.py) is reported alone: the rules'
    int64 products could wrap on it. Pass the model's CheckCache (a Prepared holds
    one: hpdsl/cost/price/types.py) to reuse its compiled checks across calls.
    """
    bounds = bound_reasons(strategy)
    if bounds:
        return tuple(Problem("past-bound", reason) for reason in bounds)
    cache = model if isinstance(model, CheckCache) else check_cache(
        model if isinstance(model, ModelColumns) else model_columns(model))
    checks = cache.checks
    split = tuple(strategy.pp_split) if strategy.pp_split is not None else None
    key = (split, _fixed_of(strategy))
    values = [0 if value is None else value for value in _traced_of(strategy)]
    plan = cache.plans.get(key)
    if plan is None and key not in cache.seen:  # the first of its shape: the rules on plain values
        cache.seen.add(key)
        flags = _judge(checks, strategy, split)(*values)
    else:  # the second compiles them
        if plan is None:
            plan = cache.plans[key] = compile_plan(_judge(checks, strategy, split), TRACED, "check")
        flags = plan(*values)
    problems = [Problem(rule.code, rule.message(strategy, checks.shape))
                for rule, flag in zip(checks.plain, flags) if flag]
    if checks.requires and all(getattr(strategy, axis) >= 1 for axis in CONDITION_AXES):
        sizes = {axis: int(getattr(strategy, axis)) for axis in CONDITION_AXES}  # else positivity reports it
        problems += [Problem("family-require", message) for message, refuses in checks.requires if refuses(sizes)]
    return tuple(problems)


def strategy_reasons(strategy: Strategy, model: CostModel | ModelColumns | CheckCache) -> tuple[str, ...]:
    """Return the messages of strategy_problems: every reason one strategy cannot run the model, in rule order."""
    return tuple(problem.message for problem in strategy_problems(strategy, model))


_fixed_of = operator.attrgetter(*(a.name for a in attrs.fields(Strategy) if a.name not in TRACED + ("pp_split",)))
"""The fields that key a compiled check (with the split): its codes are constants in it."""


def _judge(checks: Checks, strategy: Strategy, split: tuple[int, ...] | None) -> Callable[..., list[Any]]:
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
class Checks:
    """A model's rules, split into traceable predicates and family requires."""

    model_name: str
    shape: Shape
    plain: tuple[Rule, ...]
    requires: tuple[tuple[str, Callable[[dict[str, int]], bool]], ...]


@attrs.define(eq=False)
class CheckCache:
    """A model's Checks and the checks compiled from them per strategy shape: a cache, mutable by declaration.

    `check_cache` builds one per model; whoever checks many strategies of that model
    holds it (a Prepared's PriceCache does: hpdsl/cost/price/types.py).
    """

    checks: Checks
    plans: dict[tuple[Any, ...], Callable[..., list[Any]]] = attrs.field(factory=dict)
    seen: set[tuple[Any, ...]] = attrs.field(factory=set)  # shapes judged once on plain values: the next compiles


def check_cache(columns: ModelColumns) -> CheckCache:
    """Return a new CheckCache of the model whose columns are `columns`."""
    shape = model_shape(columns)
    plain = tuple(rule for rule in rules(shape) if not rule.require)
    return CheckCache(Checks(columns.cost_model.model.name, shape, plain, tuple(
        (f"{r.role}: family '{r.family.name}': {r.require.message}", _require_check(r)) for r in shape.requires)))


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


def validate_strategy(strategy: Strategy, model: CostModel | ModelColumns | CheckCache) -> tuple[str, ...]:
    """Return every reason `strategy` cannot run the model (empty: it can)."""
    return strategy_reasons(strategy, model)


def require_valid(strategy: Strategy, model: CostModel | ModelColumns | CheckCache) -> None:
    """Raise InvalidStrategyError listing every reason if `strategy` cannot run the model."""
    problems = strategy_problems(strategy, model)
    if problems:
        listed = "\n".join(f"  - {problem.message}" for problem in problems)
        raise InvalidStrategyError(f"the strategy cannot run {model_name(model)}:\n{listed}",
                                   tuple(problem.message for problem in problems), problems)


def model_name(model: CostModel | ModelColumns | CheckCache) -> str:
    """Return the name of the model a check is of."""
    if isinstance(model, CheckCache):
        return model.checks.model_name
    return (model.cost_model if isinstance(model, ModelColumns) else model).model.name
