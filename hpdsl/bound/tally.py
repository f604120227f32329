"""A slot and the module families in scope into what its family's layout declares: parameters and multiply-adds.

The estimator prices every slot of a model (hpdsl/bound/slots.py) from the
`layout { }` of the family bound to it, and the torch backend builds the same
slot through the same family and refuses a module whose parameters differ from
the layout (hpdsl/torch/layout.py): the two agree by construction.

Which variant's layout: the one the family's rules choose for the slot's
config-named selectors (`norm`, `mlp`, ...) with every parallel axis at 1.
Variants the mesh chooses (attention's local and ring, the experts' local and
ep) are one module under two parallel forms: their layouts declare the same
parameters, with per-rank dims written over the axes (`experts / ep`), so the
tally at every axis 1 is the whole module's.
"""

from __future__ import annotations

from collections.abc import Mapping

from hpdsl.bound.config import dim_environment
from hpdsl.bound.slots import Slot
from hpdsl.errors import ResolutionError
from hpdsl.ir.conditions import matching_variants, violated_requires
from hpdsl.ir.layouts import LayoutTally, default_variant, layout_tally
from hpdsl.ir.nodes import FamilyIR
from hpdsl.model.axes import AxisSizes, condition_inputs, config_selectors
from hpdsl.model.layouts import LAYOUT_AXES

WHOLE_AXES: dict[str, int] = {axis: 1 for axis in LAYOUT_AXES}
"""The axis sizes a slot is tallied at: the whole module, on one rank."""


def priced_variant(family: FamilyIR, config: object) -> str:
    """Return the variant the family's rules choose for `config`'s selectors at every axis 1 (else its default)."""
    env = condition_inputs(family, AxisSizes(), config_selectors(family, config))
    try:
        if violated_requires(family.requires, env):
            return default_variant(family)
        matches = matching_variants(family.variants, env)
    except ResolutionError:
        return default_variant(family)
    return matches[0].name if len(matches) == 1 else default_variant(family)


def slot_tally(slot: Slot, families: Mapping[str, FamilyIR]) -> LayoutTally | None:
    """Return what the layout of the family bound to `slot` declares on its config; None when it cannot say."""
    family = families.get(slot.family)
    if family is None or not family.layout:
        return None
    env = {**dim_environment(slot.config), **WHOLE_AXES}
    return layout_tally(family, env, priced_variant(family, slot.config))


__all__ = ["WHOLE_AXES", "priced_variant", "slot_tally"]
