"""A pricing column's parameters into what each rank holds: read from the slots' layouts and their shard annotations.

Every slot's family declares its parameters in a `layout { }` block, each entry
with its placement over tp (colwise, rowwise: sharded; replicate: whole on
every tp rank), and the torch backend shards the built modules by those
entries (hpdsl/torch/layout.py). The estimator splits the same entries: a
column's tp-sharded parameters are the sum over its slots' present entries
placed colwise or rowwise, its replicated ones the sum of the `replicate`
entries, and a routed-experts slot's entries are ep·etp-sharded whatever their
tp placement (each rank holds experts / ep of them, each 1/etp wide). No
per-slot formula says what is sharded (docs/cost-model.md, "Parameters per
rank"). An MTP layer's column holds its decoder layer's slots and the slots
beside it (hpdsl/bound/slots.py `mtp_slots`: its norms and projection), split
the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from hpdsl.bound.config import dim_environment
from hpdsl.bound.slots import EMBEDDING_END, Slot, layer_slots
from hpdsl.bound.tally import WHOLE_AXES, priced_variant
from hpdsl.cost.facts.columns import Column, ModelColumns
from hpdsl.cost.facts.params import (NORM_SUBMODULES, pricing_bindings, pricing_end_slots, pricing_families,
                                     pricing_mtp_slots, slot_params, towers)
from hpdsl.cost.facts.replication import SHARDED_PLACEMENTS, slot_replicated
from hpdsl.cost.formulas import xp
from hpdsl.cost.formulas.context import Ctx
from hpdsl.cost.formulas.xp import Val
from hpdsl.ir.layouts import entry_numel, layout_for
from hpdsl.ir.nodes import FamilyIR


@attrs.frozen
class ParamSplit:
    """One column's parameters: sharded by tp, replicated over tp, sharded by ep·etp."""

    tp: float = 0.0
    rep: float = 0.0
    expert: float = 0.0

    def __add__(self, other: ParamSplit) -> ParamSplit:
        return ParamSplit(self.tp + other.tp, self.rep + other.rep, self.expert + other.expert)

    def times(self, count: int) -> ParamSplit:
        """Return `count` copies of the split (a model's final norm in each tower)."""
        return ParamSplit(self.tp * count, self.rep * count, self.expert * count)


EXPERT_ROLES = frozenset({"experts"})
"""Slots expert parallelism shards: every rank of the ep group holds experts / ep of them, whatever the tp placement."""
SMALL_ROLES = frozenset({"norm", "router", "shared_gate", "gate"})
"""Slots every tp rank holds whole however the model is bound: they see the whole hidden vector."""


def slot_split(slot: Slot, families: Mapping[str, FamilyIR], whole: frozenset[str] | None = None) -> ParamSplit:
    """Return a slot's parameters split by its family layout's placements, entry by entry.

    `whole` is the column's roles priced whole on every tp rank (Column.whole);
    a model bound without a registry has none, and a mixer whose standard layout
    replicates everything (gated_delta_net, mamba) is then priced tp-sharded, its
    per-head norms excepted, as its activations are (hpdsl/cost/facts/replication.py).
    """
    family = families.get(slot.family)
    if family is None or not family.layout:
        slot_params(slot, families)  # raises, naming the slot and what it lacks
        return ParamSplit()  # pragma: no cover - slot_params raised
    env = {**dim_environment(slot.config), **WHOLE_AXES}
    entries = layout_for(family, priced_variant(family, slot.config)).values()
    bare = whole is not None and slot.role not in whole | SMALL_ROLES | EXPERT_ROLES and slot_replicated(families, slot)
    tp = rep = 0
    for entry in entries:
        numel = entry_numel(entry, env)
        if numel is None:
            slot_params(slot, families)  # raises: the layout cannot be evaluated on the slot's dims
            return ParamSplit()  # pragma: no cover - slot_params raised
        if entry.placement in SHARDED_PLACEMENTS or (bare and entry.path.split(".")[0] not in NORM_SUBMODULES):
            tp += numel
        else:
            rep += numel
    if slot.role in EXPERT_ROLES:
        return ParamSplit(expert=float(tp + rep))
    return ParamSplit(tp=float(tp), rep=float(rep))


def slots_split(slots: Iterable[Slot], families: Mapping[str, FamilyIR], whole: frozenset[str] | None = None
                ) -> ParamSplit:
    """Return the sum of the slots' splits."""
    total = ParamSplit()
    for slot in slots:
        total = total + slot_split(slot, families, whole)
    return total


def column_params(column: Column, columns: ModelColumns) -> ParamSplit:
    """Return a column's parameters split by how they shard (output: without the pp>1 copy)."""
    cost_model = columns.cost_model
    families = pricing_families(cost_model)
    ends = {slot.path: slot for slot in pricing_end_slots(cost_model)}
    if column.role == "embedding":
        # the token and position tables, the outer wiring's project_in and embedding norm, and T5's
        # relative-position bias tables (the last three held whole by every tp rank, as their layouts say)
        return slots_split([s for s in ends.values() if s.path in EMBEDDING_END or s.role == "position_bias"],
                           families)
    if column.role == "output":
        head = slots_split([ends[path] for path in ("project_out", "head") if path in ends], families)
        norm = slot_split(ends["norm"], families) if "norm" in ends else ParamSplit()  # none: no_final_norm
        return head + norm.times(towers(cost_model.model))
    cfg = column.config
    assert cfg is not None
    split = slots_split(layer_slots(cfg, pricing_bindings(cost_model, column.kind)), families, column.whole)
    if column.role == "mtp":  # its norms and projection, as their families' layouts place them
        split = split + slots_split(pricing_mtp_slots(cost_model), families)
    return split


def output_copy(columns: ModelColumns) -> float:
    """Return the embedding copy the last stage holds when pp > 1 (tied head or MTP lookup)."""
    model = columns.cost_model.model
    return columns.report.embedding if (model.tie_embeddings or model.mtp) else 0.0


def device_params(p: ParamSplit, x: Ctx, tp_extra: Val | float = 0.0) -> tuple[Val, Val]:
    """Return (dense, expert) parameters one device holds before ZeRO sharding."""
    return (p.tp + tp_extra) / x.tp + p.rep, p.expert / (x.ep * x.etp)


def static_factors(x: Ctx) -> tuple[tuple[Val, Val], ...]:
    """Return ((dense, expert) bytes per parameter) for parameters, gradients and optimizer states.

    ZeRO shards the optimizer states from level 1 (os), the gradients from 2, the
    parameters from 3, over the data-parallel group (dp·cp for dense parameters,
    the expert data-parallel group for experts). Gradients take memory when the
    run holds them (`grad_accumulation`, pp > 1 or several micro-batches).
    """
    out = []
    grads = xp.where(x.grads_held, x.grad_bytes, 0.0)  # upstream's B_grad: 0 at pp 1 without grad_accumulation
    for level, width in ((3, x.param_bytes), (2, grads), (1, x.optimizer_bytes)):
        shard_dense, shard_expert = x.zero_divisors(level)
        out.append((width / shard_dense, width / shard_expert))
    return tuple(out)


def static_bytes(dense: Val, expert: Val, factors: tuple[tuple[Val, Val], ...]) -> list[Val]:
    """Return [parameter, gradient, optimizer-state] bytes per device under ZeRO."""
    return [dense * per_dense + expert * per_expert for per_dense, per_expert in factors]


__all__ = ["EXPERT_ROLES", "ParamSplit", "column_params", "device_params", "output_copy", "slot_split",
           "slots_split", "static_bytes", "static_factors"]
