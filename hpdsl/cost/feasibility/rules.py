"""The rules a strategy can break: one vectorised predicate over the grid's arrays and its message each.

Every rule is one predicate plus the message a single strategy gets, so the
search's filter (`invalid_mask`) and `validate_strategy` can never disagree: a
strategy is valid iff no predicate flags it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs
import numpy as np

from hpdsl.cost.facts.bounds import MIN_MFU
from hpdsl.cost.facts.devices import unknown_device_reason
from hpdsl.cost.facts.columns import ModelColumns
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.facts.precision import OPTIMIZER_NAMES, PRECISION_NAMES
from hpdsl.cost.feasibility.shape import FamilyRequire, Mask, Shape, group_rows, model_shape, require_refuses
from hpdsl.cost.formulas import xp
from hpdsl.ir.conditions import names_in
from hpdsl.model.axes import CONDITION_AXES
from hpdsl.model.strategy import CP_KINDS, IMPLS, RECOMPUTE, Strategy, ZERO


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
        refused = np.array([require_refuses(family, require, dict(zip(read, row, strict=True)), selectors)
                            for row in values], dtype=bool)
        return refused[inverse] & job  # not a job at all: the positivity rules report it

    return Rule("family-require", bad, lambda s, _sh: f"{required.role}: family '{family.name}': {require.message}", require=True)


@attrs.frozen
class Rule:
    """One reason a strategy can be invalid: its problem code, a vectorised predicate and the message."""

    code: str                             # hpdsl/cost/feasibility/problems.py PROBLEMS
    bad: Callable[[Any, Shape], Any]      # over a StrategyGrid (arrays) or one traced strategy (_One)
    message: Callable[[Strategy, Shape], str]
    require: bool = False                 # a family's require (judged per axis sizes, not traced)


def _positive(field: str) -> Rule:
    return Rule("not-positive", lambda g, _s: getattr(g, field) < 1,
                lambda s, _sh: f"{field} must be at least 1, got {getattr(s, field)}")


def _divides_devices(field: str) -> Rule:
    return Rule("devices-not-divided", lambda g, _s: (g.num_devices > 0) & (getattr(g, field) >= 1)
                & (g.num_devices % xp.maximum(getattr(g, field), 1) != 0),
                lambda s, _sh: f"{field} {getattr(s, field)} does not divide the {s.num_devices} devices")


def _divides(label: str, count: int) -> Rule:
    return Rule("tp-heads", lambda g, _s: (g.tp < 1) | (count % xp.maximum(g.tp, 1) != 0),
                lambda s, _sh: f"tp {s.tp} does not divide the {count} {label}")


def _tp_width(label: str, width: int) -> Rule:
    return Rule("tp-width", lambda g, _s: (g.tp >= 1) & (width % xp.maximum(g.tp, 1) != 0),
                lambda s, _sh: f"tp {s.tp} does not divide the {label} {width}")


def _etp_width(width: int) -> Rule:
    return Rule("etp-width", lambda g, _s: (g.etp >= 1) & (width % xp.maximum(g.etp, 1) != 0),
                lambda s, _sh: f"etp {s.etp} does not divide the expert width {width}")


def _a2a(heads: int) -> Rule:
    def bad(g: StrategyGrid, _s: Shape) -> Mask:
        return (g.cp > 1) & (g.cp_kind == 1) & (heads % xp.maximum(g.tp * g.cp, 1) != 0)
    return Rule("a2a-heads", bad, lambda s, _sh: f"all-to-all context parallelism needs tp·cp = {s.tp * s.cp} "
                                    f"to divide the {heads} heads")


def _cp_a2a(heads: int) -> Rule:
    def bad(g: StrategyGrid, _s: Shape) -> Mask:
        return (g.cp > 1) & (g.cp_kind == 1) & (heads % xp.maximum(g.cp, 1) != 0)
    return Rule("a2a-cp-heads", bad, lambda s, _sh: f"all-to-all context parallelism needs cp {s.cp} "
                                    f"to divide the {heads} heads")


def _conv_tail(tail: int) -> Rule:
    # Under cp each rank sends its last conv - 1 projected inputs to the next (docs/validation.md, "Context
    # parallelism for MLA and Gated DeltaNet"): a chunk shorter than that has no such tail to send.
    def bad(g: StrategyGrid, _s: Shape) -> Mask:
        return (g.cp > 1) & (g.seq_len // xp.maximum(g.cp, 1) < tail)
    return Rule("cp-conv-tail", bad, lambda s, _sh: f"a context-parallel Gated DeltaNet hands conv - 1 = {tail} tokens to the "
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
    yield Rule("unknown-precision", lambda g, _s: g.precision < 0,
               lambda s, _sh: f"precision '{s.precision}' is not one of {', '.join(PRECISION_NAMES)}")
    yield Rule("unknown-optimizer", lambda g, _s: g.optimizer < 0,
               lambda s, _sh: f"optimizer '{s.optimizer}' is not one of {', '.join(OPTIMIZER_NAMES)}")
    yield Rule("width-not-positive", lambda g, _s: g.param_bytes < 0, lambda s, _sh: f"param_bytes must be positive, got {s.param_bytes}")
    yield Rule("width-not-positive", lambda g, _s: g.compute_bytes < 0,
               lambda s, _sh: f"compute_bytes must be positive, got {s.compute_bytes}")
    yield Rule("unknown-impl", lambda g, _s: g.impl < 0, lambda s, _sh: f"impl '{s.impl}' is not one of {', '.join(IMPLS)}")


def _static_rules() -> Iterator[Rule]:
    for field in ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "seq_len", "softmax_bytes"):
        yield _positive(field)
    yield from precision_rules()
    yield Rule("unknown-recompute", lambda g, _s: g.recompute < 0,
               lambda s, _sh: f"recompute '{s.recompute}' is not one of {', '.join(RECOMPUTE)}")
    yield Rule("unknown-zero", lambda g, _s: g.zero < 0,
               lambda s, _sh: f"zero '{s.zero}' is not one of {', '.join(ZERO)}")
    yield Rule("unknown-cp-kind", lambda g, _s: g.cp_kind < 0,
               lambda s, _sh: f"cp_kind '{s.cp_kind}' is not one of {', '.join(CP_KINDS)}")
    yield Rule("unknown-device", lambda g, _s: g.device_id < 0,
               lambda s, _sh: unknown_device_reason(s.device) or f"unknown device '{s.device}'")
    yield Rule("mfu-range", lambda g, _s: xp.logical_not((g.mfu == 0) | ((g.mfu >= MIN_MFU) & (g.mfu <= 1))),
               lambda s, _sh: f"mfu must be in [{MIN_MFU:g}, 1], got {s.mfu} (or 0: the device's efficiencies)")
    yield Rule("recompute-layers-negative", lambda g, _s: g.recompute_layers < 0,
               lambda s, _sh: f"recompute_layers must be positive, got {s.recompute_layers}")
    yield Rule("device-count-mismatch", lambda g, _s: (g.num_devices > 0) & (g.dp * g.tp * g.pp * g.cp != g.num_devices),
               lambda s, _sh: f"dp·tp·pp·cp = {s.devices}, but the job has {s.num_devices} devices")
    for field in ("tp", "pp", "dp", "cp"):
        yield _divides_devices(field)
    yield Rule("expert-mesh", lambda g, _s: (g.ep * g.etp >= 1) & ((g.dp * g.cp * g.tp) % xp.maximum(g.ep * g.etp, 1) != 0),
               lambda s, _sh: f"ep·etp = {s.ep * s.etp} does not divide dp·cp·tp = "
                              f"{s.dp * s.cp * s.tp} (the devices of a stage's expert layers)")
    yield Rule("global-batch-multiple", lambda g, _s: (g.global_batch > 0) & (g.global_batch % xp.maximum(g.micro_batch * g.dp, 1) != 0),
               lambda s, _sh: f"global batch {s.global_batch} is not a multiple of "
                              f"micro_batch·dp = {s.micro_batch * s.dp}")
    yield Rule("vpp-without-pp", lambda g, _s: (g.vpp > 1) & (g.pp < 2),
               lambda s, _sh: f"vpp {s.vpp} needs pipeline parallelism (pp > 1)")
    yield Rule("interleaved-micro-batches", lambda g, _s: (g.vpp > 1) & (g.pp > 1) & (_micro_batches(g) % xp.maximum(g.pp, 1) != 0),
               lambda s, _sh: f"the interleaved schedule needs the {s.micro_batches} micro-batches "
                              f"to be a multiple of pp {s.pp}")
    yield Rule("ring-seq-len", lambda g, _s: (g.cp > 1) & (g.cp_kind == 0) & (g.seq_len % xp.maximum(2 * g.cp, 1) != 0),
               lambda s, _sh: f"seq_len {s.seq_len} is not divisible by 2·cp = {2 * s.cp} "
                              f"(ring attention balances causal chunks)")
    yield Rule("a2a-seq-len", lambda g, _s: (g.cp > 1) & (g.cp_kind == 1) & (g.seq_len % xp.maximum(g.cp, 1) != 0),
               lambda s, _sh: f"seq_len {s.seq_len} is not divisible by cp {s.cp}")


def _layer_rules(shape: Shape) -> Iterator[Rule]:
    yield Rule("too-many-chunks", lambda g, s: (g.split_id == 0) & (g.pp * g.vpp > s.layers),
               lambda s, sh: f"{s.pp * s.vpp} pipeline chunks (pp·vpp) for {sh.layers} layers: "
                             f"every chunk needs a layer")
    yield Rule("split-length", _split_len, lambda s, _sh: f"pp_split lists {len(s.pp_split or ())} chunks, but "
                                          f"pp·vpp = {s.pp * s.vpp}")
    yield Rule("split-sum", _split_sum, lambda s, sh: f"pp_split sums to {sum(s.pp_split or ())} layers, but the "
                                         f"model has {sh.layers}")
    yield Rule("split-negative", _split_negative, lambda s, _sh: "pp_split has a negative layer count")


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
        yield Rule("ep-experts", lambda g, _s: (g.ep >= 1) & (experts % xp.maximum(g.ep, 1) != 0),
                   lambda s, _sh: f"ep {s.ep} does not divide the {experts} routed experts")
        for width in shape.expert_widths:
            yield _etp_width(width)
        yield Rule("moe-needs-sp", lambda g, s: (g.tp > 1) & (_sp(g, s) == 0),
                   lambda s, _sh: f"a MoE model with tp {s.tp} needs sequence parallelism "
                                  f"(Megatron requires it; pass --sp)")
    else:
        yield Rule("no-experts", lambda g, _s: (g.ep > 1) | (g.etp > 1),
                   lambda s, _sh: f"ep {s.ep} / etp {s.etp}: the model has no routed experts to shard")
    for required in shape.requires:
        yield _require_rule(required)


def rules(shape: Shape) -> tuple[Rule, ...]:
    """Return every rule that applies to a model of `shape`."""
    return (*_static_rules(), *_layer_rules(shape), *_model_rules(shape))


def invalid_mask(columns: ModelColumns, grid: StrategyGrid, *, model_only: bool = False,
                 requires: bool = True, shape: Shape | None = None) -> Mask:
    """Return, per candidate, whether any rule flags it (model_only: only the model's rules).

    `requires=False` leaves out the families' requires: they read only the axis
    sizes (CONDITION_AXES), so a caller whose grid's sizes all passed them already
    (the search's layouts) need not judge them again. `shape` is model_shape(columns)
    where the caller holds it (a Prepared's checks): it is not found again.
    """
    shape = model_shape(columns) if shape is None else shape
    bad = np.zeros(len(grid), dtype=bool)
    for rule in (_model_rules(shape) if model_only else rules(shape)):
        if requires or not rule.require:
            bad |= rule.bad(grid, shape)
    return bad

