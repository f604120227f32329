"""A bound layer and the module families in scope into the slot roles tensor parallelism leaves whole.

The families' `layout { ... }` blocks say, parameter by parameter, what a tp
split shards (colwise, rowwise) and what every tp rank holds whole (replicate);
the torch backend (hpdsl/torch/layout.py) shards the modules it builds by them.
The estimator prices from the same layouts: a slot whose family layout
replicates every one of its parameters (gated_delta_net, grouped_experts as
shipped) is priced whole on every tp rank, its parameters, gradients and
optimizer states not divided by tp and its activations not split either. A
slot whose layout shards some parameters is split entry by entry
(hpdsl/cost/formulas/param_shards.py). Without families (a model bound without
a registry) no slot is whole: a fully replicated mixer is tp-sharded, as before.
"""

from __future__ import annotations

from collections.abc import Mapping

from hpdsl.bound.bind import CostModel, LayerConfig
from hpdsl.bound.config import dim_environment
from hpdsl.bound.slots import Slot, kind_bindings, layer_slots
from hpdsl.ir.layouts import evaluate_dim
from hpdsl.ir.nodes import FamilyIR

SHARDED_PLACEMENTS = ("colwise", "rowwise")
"""Placements a tp split shards; `replicate` leaves the parameter whole on every tp rank."""


def replicated_numel(family: FamilyIR, slot: Slot) -> tuple[int, int]:
    """Return (sharded, replicated) elements the family's layout places for `slot` (before tp).

    Every entry counts once, whichever variant has it, with its dims evaluated on
    the slot's config; an entry whose dims read an axis (experts / ep) or are
    not whole counts as 0. This is the layout's own tally; pricing takes the
    exact parameter counts of hpdsl.cost.facts.params and only asks whether a slot has
    any sharded entry (`slot_replicated`).
    """
    env = dim_environment(slot.config)
    sharded = replicated = 0
    for entry in family.layout or ():
        numel = 1
        for dim in entry.dims:
            value = evaluate_dim(dim, env)
            numel = 0 if value is None or value.denominator != 1 else numel * int(value)
        if entry.placement in SHARDED_PLACEMENTS:
            sharded += numel
        else:
            replicated += numel
    return sharded, replicated


def slot_replicated(families: Mapping[str, FamilyIR], slot: Slot) -> bool:
    """Return whether the family filling `slot` has a layout that replicates every parameter it places."""
    family = families.get(slot.family)
    if family is None or not family.layout:
        return False
    return all(entry.placement not in SHARDED_PLACEMENTS for entry in family.layout)


def replicated_roles(cost_model: CostModel, config: LayerConfig, kind: str | None) -> frozenset[str]:
    """Return the slot roles of a layer of `kind` priced with `config` that every tp rank holds whole."""
    if not cost_model.families:
        return frozenset()
    return frozenset(slot.role for slot in layer_slots(config, kind_bindings(cost_model, kind))
                     if slot_replicated(cost_model.families, slot))


__all__ = ["SHARDED_PLACEMENTS", "replicated_numel", "replicated_roles", "slot_replicated"]
