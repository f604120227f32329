"""Strategies against a model into the reasons they cannot run it, over a grid or for one.

Every rule is one vectorised predicate over the grid's arrays plus the message a
single strategy gets, so the search's filter and `validate_strategy` can never
disagree: a strategy is valid iff no predicate flags it.
"""

from __future__ import annotations

import math
import operator
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import numpy as np

from hpdsl.bound.bind import CostModel
from hpdsl.cost.devices import unknown_device_reason
from hpdsl.cost import xp
from hpdsl.cost.bounds import MIN_MFU, bound_reasons
from hpdsl.cost.columns import ModelColumns, head_counts, model_columns
from hpdsl.cost.memory import MIXER_ROLES
from hpdsl.cost.precision import OPTIMIZER_NAMES, PRECISION_NAMES
from hpdsl.cost.strategy import CP_KINDS, IMPLS, RECOMPUTE, ZERO, TRACED, Strategy, StrategyGrid, codes_of
from hpdsl.cost.trace import compile_plan
from hpdsl.ir.conditions import evaluate, names_in
from hpdsl.ir.nodes import FamilyIR, RequireIR
from hpdsl.bound.slots import end_slots, model_slots
from hpdsl.model import ops as OP
from hpdsl.model.axes import CONDITION_AXES, AxisSizes, condition_inputs, config_selectors
from hpdsl.model.fields import Scalar
from hpdsl.model.ops import count as op_count

Mask = np.ndarray


@attrs.frozen
class FamilyRequire:
    """A require of the family that builds a slot, with the selectors that follow the slot's config."""

    role: str
    family: FamilyIR
    require: RequireIR
    selectors: tuple[tuple[str, Scalar], ...] = ()


@attrs.frozen
class Shape:
    """The model facts the rules read."""

    heads: tuple[tuple[str, int], ...]        # what tp must divide
    a2a_heads: tuple[int, ...]                # what tp·cp must divide under all-to-all CP
    experts: int                              # routed experts (1: dense model)
    expert_widths: tuple[int, ...]            # what etp must divide
    tp_widths: tuple[tuple[str, int], ...]    # dense and shared expert widths tp must divide
    layers: int
    shard_activations: bool
    requires: tuple[FamilyRequire, ...] = ()  # every family require a slot of the model is built under
    cp_heads: tuple[int, ...] = ()            # a tp-replicated mixer's: what cp alone must divide (a2a CP)
    conv_tails: tuple[int, ...] = ()          # a Gated DeltaNet's conv - 1: the tokens a cp rank hands on


def model_shape(columns: ModelColumns) -> Shape:
    """Return the facts of a model that strategies are checked against."""
    heads: dict[tuple[str, int], None] = {}
    a2a: dict[int, None] = {}
    cp_heads: dict[int, None] = {}
    tails: dict[int, None] = {}
    widths: dict[tuple[str, int], None] = {}
    experts = 1
    expert_widths: dict[int, None] = {}
    for index in columns.layer_columns:
        column = columns.columns[index]
        config = column.config
        assert config is not None
        counts = head_counts(config)
        if config.attn_kind == "linear" and config.conv > 1:
            tails[config.conv - 1] = None
        swapped = counts.get("attention heads", counts.get("linear-attention value heads", 1))
        if MIXER_ROLES & column.whole:
            cp_heads[swapped] = None  # every tp rank holds all the heads: tp need not divide them
        else:
            heads.update(dict.fromkeys(counts.items()))
            a2a[swapped] = None
        if config.experts > 1:
            experts = max(experts, config.experts)
            expert_widths[config.ffn_width] = None
            if config.shared_experts:
                widths["shared expert width", config.shared_width] = None
        elif op_count(config.ops, OP.FF_MM):
            widths["feed-forward width", config.ffn_width] = None
    cost = columns.cost_model
    return Shape(tuple(heads), tuple(a2a), experts, tuple(expert_widths), tuple(widths),
                 cost.model.layers, cost.profile.run.shard_activations, family_requires(cost),
                 tuple(cp_heads), tuple(tails))


def family_requires(cost: CostModel) -> tuple[FamilyRequire, ...]:
    """Return the requires of every family that builds a slot of the model (none without families).

    A selector named like a config field is judged at the slot's value (model.py's
    build does the same): `require qk_norm and qk_norm_full -> tp == 1` refuses
    tp > 1 for a model with a full-width QK-norm only.
    """
    found: dict[tuple[str, str, tuple[tuple[str, Scalar], ...]], FamilyRequire] = {}
    slots = [*(slot for _kind, slot in model_slots(cost)), *end_slots(cost)] if cost.families else []
    for slot in slots:
        family = cost.families.get(slot.family)
        if family is None:
            continue
        chosen = tuple(sorted(config_selectors(family, slot.config).items()))
        for require in family.requires:
            found.setdefault((family.name, require.message, chosen),
                             FamilyRequire(slot.role, family, require, chosen))
    return tuple(found.values())


def _require_rule(required: FamilyRequire) -> Rule:
    """A family's require over the grid's axis sizes, its selectors at the slot's values or their defaults."""
    family, require = required.family, required.require
    names = names_in(require.condition)
    read = [a for a in CONDITION_AXES if a in names or (a == family.parallel and "parallel" in names)]
    selectors = dict(required.selectors)

    def bad(g: StrategyGrid, _s: Shape) -> Mask:
        # Judged once per distinct value of the axes the require reads (few), never per candidate.
        job = np.logical_and.reduce([getattr(g, axis) >= 1 for axis in CONDITION_AXES])
        values, inverse = group_rows([np.maximum(getattr(g, axis), 1) for axis in read], len(g))
        refused = np.array([_refuses(family, require, dict(zip(read, row, strict=True)), selectors)
                            for row in values], dtype=bool)
        return refused[inverse] & job  # not a job at all: the positivity rules report it

    return Rule(bad, lambda s, _sh: f"{required.role}: family '{family.name}': {require.message}", require=True)


def group_rows(columns: list[np.ndarray], n: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Return the distinct rows of non-negative int columns and each candidate's row index.

    A packed int64 key (each column's values ranked, then mixed-radix) grouped with
    bincount when small: linear, where `np.unique(axis=0)` sorts rows.
    """
    key = np.zeros(n, dtype=np.int64)
    distinct: list[np.ndarray] = []
    for column in columns:
        ranks, values = _ranks(np.asarray(column, dtype=np.int64))
        key = key * len(values) + ranks
        distinct.append(values)
    size = math.prod(len(v) for v in distinct)
    if size <= 4 * n + 4096:
        present = np.flatnonzero(np.bincount(key, minlength=size))
        index = np.full(size, -1, dtype=np.int64)
        index[present] = np.arange(len(present))
        keys, inverse = present, index[key]
    else:
        keys, inverse = np.unique(key, return_inverse=True)
    rows = []
    for k in keys.tolist():
        row = []
        for values in reversed(distinct):
            k, r = divmod(k, len(values))
            row.append(int(values[r]))
        rows.append(tuple(reversed(row)))
    return rows, inverse.ravel()


def _ranks(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    top = int(column.max(initial=0))
    if top <= 4 * len(column) + 4096:
        counts = np.bincount(column, minlength=top + 1)
        values = np.flatnonzero(counts)
        lookup = np.cumsum(counts > 0) - 1
        return lookup[column], values
    values, ranks = np.unique(column, return_inverse=True)
    return ranks.ravel(), values


def _refuses(family: FamilyIR, require: RequireIR, row: dict[str, int], selectors: dict[str, Scalar]) -> bool:
    sizes = AxisSizes(**row)  # the axes the require does not read stay 1: it cannot tell
    return not evaluate(require.condition, condition_inputs(family, sizes, selectors))


@attrs.frozen
class Rule:
    """One reason a strategy can be invalid: a vectorised predicate and the message."""

    bad: Callable[[Any, Shape], Any]      # over a StrategyGrid (arrays) or one traced strategy (_One)
    message: Callable[[Strategy, Shape], str]
    require: bool = False                 # a family's require (judged per axis sizes, not traced)


def _positive(field: str) -> Rule:
    return Rule(lambda g, _s: getattr(g, field) < 1,
                lambda s, _sh: f"{field} must be at least 1, got {getattr(s, field)}")


def _divides_devices(field: str) -> Rule:
    return Rule(lambda g, _s: (g.num_devices > 0) & (getattr(g, field) >= 1)
                & (g.num_devices % xp.maximum(getattr(g, field), 1) != 0),
                lambda s, _sh: f"{field} {getattr(s, field)} does not divide the {s.num_devices} devices")


def _divides(label: str, count: int) -> Rule:
    return Rule(lambda g, _s: (g.tp < 1) | (count % xp.maximum(g.tp, 1) != 0),
                lambda s, _sh: f"tp {s.tp} does not divide the {count} {label}")


def _tp_width(label: str, width: int) -> Rule:
    return Rule(lambda g, _s: (g.tp >= 1) & (width % xp.maximum(g.tp, 1) != 0),
                lambda s, _sh: f"tp {s.tp} does not divide the {label} {width}")


def _etp_width(width: int) -> Rule:
    return Rule(lambda g, _s: (g.etp >= 1) & (width % xp.maximum(g.etp, 1) != 0),
                lambda s, _sh: f"etp {s.etp} does not divide the expert width {width}")


def _a2a(heads: int) -> Rule:
    def bad(g: StrategyGrid, _s: Shape) -> Mask:
        return (g.cp > 1) & (g.cp_kind == 1) & (heads % xp.maximum(g.tp * g.cp, 1) != 0)
    return Rule(bad, lambda s, _sh: f"all-to-all context parallelism needs tp·cp = {s.tp * s.cp} "
                                    f"to divide the {heads} heads")


def _cp_a2a(heads: int) -> Rule:
    def bad(g: StrategyGrid, _s: Shape) -> Mask:
        return (g.cp > 1) & (g.cp_kind == 1) & (heads % xp.maximum(g.cp, 1) != 0)
    return Rule(bad, lambda s, _sh: f"all-to-all context parallelism needs cp {s.cp} "
                                    f"to divide the {heads} heads")


def _conv_tail(tail: int) -> Rule:
    # Under cp each rank sends its last conv - 1 projected inputs to the next (docs/validation.md, "Context
    # parallelism for MLA and Gated DeltaNet"): a chunk shorter than that has no such tail to send.
    def bad(g: StrategyGrid, _s: Shape) -> Mask:
        return (g.cp > 1) & (g.seq_len // xp.maximum(g.cp, 1) < tail)
    return Rule(bad, lambda s, _sh: f"a context-parallel Gated DeltaNet hands conv - 1 = {tail} tokens to the "
                                    f"next cp rank: seq_len {s.seq_len} / cp {s.cp} gives {s.seq_len // s.cp} "
                                    f"per rank, fewer")


def _split_sum(g: StrategyGrid, shape: Shape) -> Mask:
    sums = np.array([sum(s) if s is not None else shape.layers for s in g.splits])
    return sums[g.split_id] != shape.layers


def _split_len(g: StrategyGrid, _shape: Shape) -> Mask:
    lens = np.array([len(s) if s is not None else -1 for s in g.splits])
    return (lens[g.split_id] >= 0) & (lens[g.split_id] != g.pp * g.vpp)


def _split_negative(g: StrategyGrid, _shape: Shape) -> Mask:
    neg = np.array([s is not None and min(s, default=0) < 0 for s in g.splits])
    return neg[g.split_id]


def _sp(g: StrategyGrid, shape: Shape) -> np.ndarray:
    return xp.where(g.sp < 0, int(shape.shard_activations), g.sp)


def _batch(g: StrategyGrid) -> np.ndarray:
    return xp.where(g.global_batch > 0, g.global_batch, g.micro_batch * g.dp * g.pp)


def _micro_batches(g: StrategyGrid) -> np.ndarray:
    return _batch(g) // xp.maximum(g.micro_batch * g.dp, 1)


def precision_rules() -> Iterator[Rule]:
    """Yield the precision and optimizer checks: known names, positive stated widths (0: the precision's)."""
    yield Rule(lambda g, _s: g.precision < 0,
               lambda s, _sh: f"precision '{s.precision}' is not one of {', '.join(PRECISION_NAMES)}")
    yield Rule(lambda g, _s: g.optimizer < 0,
               lambda s, _sh: f"optimizer '{s.optimizer}' is not one of {', '.join(OPTIMIZER_NAMES)}")
    yield Rule(lambda g, _s: g.param_bytes < 0, lambda s, _sh: f"param_bytes must be positive, got {s.param_bytes}")
    yield Rule(lambda g, _s: g.compute_bytes < 0,
               lambda s, _sh: f"compute_bytes must be positive, got {s.compute_bytes}")
    yield Rule(lambda g, _s: g.impl < 0, lambda s, _sh: f"impl '{s.impl}' is not one of {', '.join(IMPLS)}")


def _static_rules() -> Iterator[Rule]:
    for field in ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "seq_len", "softmax_bytes"):
        yield _positive(field)
    yield from precision_rules()
    yield Rule(lambda g, _s: g.recompute < 0,
               lambda s, _sh: f"recompute '{s.recompute}' is not one of {', '.join(RECOMPUTE)}")
    yield Rule(lambda g, _s: g.zero < 0,
               lambda s, _sh: f"zero '{s.zero}' is not one of {', '.join(ZERO)}")
    yield Rule(lambda g, _s: g.cp_kind < 0,
               lambda s, _sh: f"cp_kind '{s.cp_kind}' is not one of {', '.join(CP_KINDS)}")
    yield Rule(lambda g, _s: g.device_id < 0, lambda s, _sh: unknown_device_reason(s.device)
               or f"unknown device '{s.device}'")
    yield Rule(lambda g, _s: xp.logical_not((g.mfu == 0) | ((g.mfu >= MIN_MFU) & (g.mfu <= 1))),
               lambda s, _sh: f"mfu must be in [{MIN_MFU:g}, 1], got {s.mfu} (or 0: the device's efficiencies)")
    yield Rule(lambda g, _s: g.recompute_layers < 0,
               lambda s, _sh: f"recompute_layers must be positive, got {s.recompute_layers}")
    yield Rule(lambda g, _s: (g.num_devices > 0) & (g.dp * g.tp * g.pp * g.cp != g.num_devices),
               lambda s, _sh: f"dp·tp·pp·cp = {s.devices}, but the job has {s.num_devices} devices")
    for field in ("tp", "pp", "dp", "cp"):
        yield _divides_devices(field)
    yield Rule(lambda g, _s: (g.ep * g.etp >= 1) & ((g.dp * g.cp * g.tp) % xp.maximum(g.ep * g.etp, 1) != 0),
               lambda s, _sh: f"ep·etp = {s.ep * s.etp} does not divide dp·cp·tp = "
                              f"{s.dp * s.cp * s.tp} (the devices of a stage's expert layers)")
    yield Rule(lambda g, _s: (g.global_batch > 0) & (g.global_batch % xp.maximum(g.micro_batch * g.dp, 1) != 0),
               lambda s, _sh: f"global batch {s.global_batch} is not a multiple of "
                              f"micro_batch·dp = {s.micro_batch * s.dp}")
    yield Rule(lambda g, _s: (g.vpp > 1) & (g.pp < 2),
               lambda s, _sh: f"vpp {s.vpp} needs pipeline parallelism (pp > 1)")
    yield Rule(lambda g, _s: (g.vpp > 1) & (g.pp > 1) & (_micro_batches(g) % xp.maximum(g.pp, 1) != 0),
               lambda s, _sh: f"the interleaved schedule needs the {s.micro_batches} micro-batches "
                              f"to be a multiple of pp {s.pp}")
    yield Rule(lambda g, _s: (g.cp > 1) & (g.cp_kind == 0) & (g.seq_len % xp.maximum(2 * g.cp, 1) != 0),
               lambda s, _sh: f"seq_len {s.seq_len} is not divisible by 2·cp = {2 * s.cp} "
                              f"(ring attention balances causal chunks)")
    yield Rule(lambda g, _s: (g.cp > 1) & (g.cp_kind == 1) & (g.seq_len % xp.maximum(g.cp, 1) != 0),
               lambda s, _sh: f"seq_len {s.seq_len} is not divisible by cp {s.cp}")


def _layer_rules(shape: Shape) -> Iterator[Rule]:
    yield Rule(lambda g, s: (g.split_id == 0) & (g.pp * g.vpp > s.layers),
               lambda s, sh: f"{s.pp * s.vpp} pipeline chunks (pp·vpp) for {sh.layers} layers: "
                             f"every chunk needs a layer")
    yield Rule(_split_len, lambda s, _sh: f"pp_split lists {len(s.pp_split or ())} chunks, but "
                                          f"pp·vpp = {s.pp * s.vpp}")
    yield Rule(_split_sum, lambda s, sh: f"pp_split sums to {sum(s.pp_split or ())} layers, but the "
                                         f"model has {sh.layers}")
    yield Rule(_split_negative, lambda s, _sh: "pp_split has a negative layer count")


def _model_rules(shape: Shape) -> Iterator[Rule]:
    for label, count in shape.heads:
        yield _divides(label, count)
    for heads in shape.a2a_heads:
        yield _a2a(heads)
    for heads in shape.cp_heads:
        yield _cp_a2a(heads)
    for tail in shape.conv_tails:
        yield _conv_tail(tail)
    for label, width in shape.tp_widths:
        yield _tp_width(label, width)
    if shape.experts > 1:
        experts = shape.experts
        yield Rule(lambda g, _s: (g.ep >= 1) & (experts % xp.maximum(g.ep, 1) != 0),
                   lambda s, _sh: f"ep {s.ep} does not divide the {experts} routed experts")
        for width in shape.expert_widths:
            yield _etp_width(width)
        yield Rule(lambda g, s: (g.tp > 1) & (_sp(g, s) == 0),
                   lambda s, _sh: f"a MoE model with tp {s.tp} needs sequence parallelism "
                                  f"(Megatron requires it; pass --sp)")
    else:
        yield Rule(lambda g, _s: (g.ep > 1) | (g.etp > 1),
                   lambda s, _sh: f"ep {s.ep} / etp {s.etp}: the model has no routed experts to shard")
    for required in shape.requires:
        yield _require_rule(required)


def rules(shape: Shape) -> tuple[Rule, ...]:
    """Return every rule that applies to a model of `shape`."""
    return (*_static_rules(), *_layer_rules(shape), *_model_rules(shape))


def invalid_mask(columns: ModelColumns, grid: StrategyGrid, *, model_only: bool = False,
                 requires: bool = True) -> Mask:
    """Return, per candidate, whether any rule flags it (model_only: only the model's rules).

    `requires=False` leaves out the families' requires: they read only the axis
    sizes (CONDITION_AXES), so a caller whose grid's sizes all passed them already
    (the search's layouts) need not judge them again.
    """
    shape = model_shape(columns)
    bad = np.zeros(len(grid), dtype=bool)
    for rule in (_model_rules(shape) if model_only else rules(shape)):
        if requires or not rule.require:
            bad |= rule.bad(grid, shape)
    return bad


def strategy_reasons(strategy: Strategy, cost_model: CostModel | ModelColumns) -> tuple[str, ...]:
    """Return every reason one strategy cannot run the model, in rule order.

    The same predicates the grid runs, traced once per model and per strategy
    shape (its non-numeric choices) into a compiled check (hpdsl/cost/trace.py);
    a family's requires are judged on the strategy's axis sizes directly. A
    number past its bound (hpdsl/cost/bounds.py) is reported alone: the rules'
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
            memo[row] = _refuses(family, require, dict(zip(read, row, strict=True)), selectors)
        return memo[row]

    return refuses
