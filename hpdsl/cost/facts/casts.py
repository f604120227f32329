"""A layer's linear weight matmuls into what fp8-mixed casts per micro-batch: operands and weights.

Under fp8-mixed a layer's linears run their three matmuls (forward, input
gradient, weight gradient) in fp8 with per-tensor dynamic scaling, as torchao's
Float8Linear does in torchtitan and Transformer Engine in Megatron-LM: each
operand is read once for its absolute maximum and once more to be cast, and the
weight-gradient matmul takes the input and the output gradient cast again in
the other layout (docs/cost-model.md#the-device-time-model, "float8 casts").
What is cast is read from the layouts, as the matmuls are
(hpdsl/cost/facts/matmuls.py): every rank-2 `weight` of a mixer, feed-forward
or MTP projection slot is a Linear [out, in] whose input (in) and output
gradient (out) are cast per token, and an expert bank [experts, a, b] casts
top_k tokens' a + b. A colwise entry's input is whole on every tp rank (cast on
the sequence shard under sequence parallelism) and its output split; a rowwise
entry the other way round; a replicated one whole.
Convolutions, the embedding and the head are not converted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

import attrs

from hpdsl.bound.bind import LayerConfig
from hpdsl.bound.config import dim_environment
from hpdsl.bound.slots import Slot, layer_slots
from hpdsl.bound.tally import WHOLE_AXES, priced_variant
from hpdsl.cost.facts.matmuls import FFN_ROLES
from hpdsl.cost.facts.roles import MIXER_ROLES
from hpdsl.ir.layouts import entry_numel, evaluate_dim, layout_for, whole
from hpdsl.ir.nodes import FamilyIR, LayoutEntryIR

CAST_ROLES = MIXER_ROLES | FFN_ROLES | {"mtp_proj"}
"""The slots whose linears fp8-mixed converts: the layers' (not the embedding's or the head's)."""


@attrs.frozen
class Casts:
    """Elements fp8-mixed casts: operands per token (inputs, output gradients) by how tp divides them, and weights.

    A colwise entry's input is whole on every tp rank unless sequence parallelism
    shards it: float8 tensor parallelism (torchtitan's Float8ColwiseParallel) casts
    it on the sequence shard, before the all-gather.
    """

    colwise_inputs: Fraction = Fraction(0)  # divided by the sequence-parallel shards (tp under sp, else 1)
    inputs: Fraction = Fraction(0)          # whole on every tp rank
    split_inputs: Fraction = Fraction(0)    # divided by tp
    grads: Fraction = Fraction(0)           # output gradients whole on every tp rank
    split_grads: Fraction = Fraction(0)     # divided by tp
    weights: Fraction = Fraction(0)         # dense weights split over tp (colwise, rowwise)
    whole_weights: Fraction = Fraction(0)   # dense weights whole on every tp rank (replicated)
    expert_weights: Fraction = Fraction(0)  # expert banks, split over ep · etp

    def __add__(self, other: Casts) -> Casts:
        return Casts(*(getattr(self, a.name) + getattr(other, a.name) for a in attrs.fields(Casts)))


def slot_casts(slot: Slot, families: Mapping[str, FamilyIR]) -> Casts:
    """Return what fp8-mixed casts of `slot`'s linears, from its family's layout (none outside CAST_ROLES)."""
    family = families.get(slot.family)
    if family is None or not family.layout or slot.role not in CAST_ROLES:
        return Casts()
    env = {**dim_environment(slot.config), **WHOLE_AXES}
    total = Casts()
    for path, entry in layout_for(family, priced_variant(family, slot.config)).items():
        if path.split(".")[-1] == "weight" or (slot.role == "experts" and len(entry.dims) >= 3):
            total += _entry_casts(slot, entry, env)
    return total


def _entry_casts(slot: Slot, entry: LayoutEntryIR, env: Mapping[str, int]) -> Casts:
    sizes = [whole(evaluate_dim(d, env)) for d in entry.dims]
    numel = entry_numel(entry, env)
    if not numel or any(size is None for size in sizes):
        return Casts()
    if slot.role == "experts" and len(sizes) >= 3:
        # A bank's two matrix dims are its input and output, in either order: half the operands each.
        half = Fraction(slot.config.top_k) * (int(sizes[-1] or 0) + int(sizes[-2] or 0)) / 2
        return Casts(split_inputs=half, split_grads=half, expert_weights=Fraction(numel))
    if len(sizes) != 2:  # a convolution: not converted
        return Casts()
    out, inp, weight = Fraction(int(sizes[0] or 0)), Fraction(int(sizes[1] or 0)), Fraction(numel)
    if entry.placement == "colwise":
        return Casts(colwise_inputs=inp, split_grads=out, weights=weight)
    if entry.placement == "rowwise":
        return Casts(split_inputs=inp, grads=out, weights=weight)
    return Casts(inputs=inp, grads=out, whole_weights=weight)


def layer_casts(cfg: LayerConfig, bindings: Mapping[str, str], families: Mapping[str, FamilyIR],
                extra: Iterable[Slot] = ()) -> Casts:
    """Return what fp8-mixed casts of one layer priced with `cfg` (and `extra` slots: an MTP layer's)."""
    total = Casts()
    for slot in (*layer_slots(cfg, bindings), *extra):
        total += slot_casts(slot, families)
    return total


__all__ = ["CAST_ROLES", "Casts", "layer_casts", "slot_casts"]
