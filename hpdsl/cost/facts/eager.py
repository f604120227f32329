"""What a column's eager PyTorch code dispatches: aten calls per micro-batch and elements moved per token.

An eager implementation (the trainer on a CPU) runs each module op by op: every
aten call costs host time, and every unfused elementwise op reads and writes
whole tensors. Each family declares what its reference module dispatches in a
forward and backward, as `eager calls` and `eager moved` terms of its `cost { }`
block (families/*.hpf; docs/language.md, "Eager terms"), counted from the built
module with a TorchDispatchMode (tests/torch/test_eager_terms.py holds them
equal). Here they are summed over a column's slots, with what no family runs:

- a layer's residual adds: per block one add in the forward and one gradient
  accumulation in the backward, each reading two hidden-wide tensors and writing one;
- the output column's loss (cross-entropy over the fp32 logits: log-softmax, NLL
  and their backwards, the labels' views) and the model's position ids.

A tied head runs the embedding's table as a linear: the output column prices it as the family the head
role binds declares its own linear (the table's two gradients summed make its count the untied head's).
A column whose slots do not all declare eager terms has no EagerWork: the time model
prices it by its op vector and saved bytes instead (hpdsl/cost/formulas/device_time.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

import attrs

from hpdsl.bound import wiring
from hpdsl.bound.bind import LayerConfig
from hpdsl.bound.shape import layer_shape
from hpdsl.bound.slots import Slot, crosses, layer_config, layer_slots
from hpdsl.cost.facts.cost_terms import DeclaredTerm, slot_terms
from hpdsl.ir.nodes import FamilyIR
from hpdsl.model.cost_terms import EAGER

RESIDUAL_CALLS = 2
"""Aten calls of one residual add: the forward's add and the backward's gradient accumulation."""

RESIDUAL_MOVED = 6
"""Hidden-wide elements per token one residual add moves: two read and one written, forward and backward."""

LOSS_CALLS = 12
"""Aten calls of the loss beside the head: log-softmax, NLL, their backwards, the labels' views, the position ids."""

LOSS_MOVED_PER_VOCAB = 8
"""Elements per token and vocabulary entry the loss moves: log-softmax reads and writes the logits, NLL's
backward writes a gradient of their size, log-softmax's backward reads two and writes one."""

LOSS_MOVED = 5
"""Elements per token the loss moves beside the logits: the NLL's gathered values, the ids' positions."""


OUTPUT_PATHS = ("norm", "project_out", "head")
"""The model-level slots the output column runs; the embedding column runs the others (hpdsl/bound/slots.py
end_slots: the embedding, its projection and norm, learned positions, position biases)."""


@attrs.frozen
class EagerWork:
    """What a column dispatches eagerly: calls per micro-batch; elements per token by how tp splits them."""

    calls: Fraction = Fraction(0)
    split: Fraction = Fraction(0)      # divided by tp (as the heads)
    sequence: Fraction = Fraction(0)   # divided by sp (whole on every tp rank without sequence parallelism)
    whole: Fraction = Fraction(0)      # whole on every tp rank
    per_key: Fraction = Fraction(0)    # per token and key, divided by tp
    logits: Fraction = Fraction(0)     # divided as the logits are (tp under loss parallelism, else whole)

    def __add__(self, other: EagerWork) -> EagerWork:
        """Return the two columns' (or slots') work together."""
        return EagerWork(*(getattr(self, a.name) + getattr(other, a.name) for a in attrs.fields(EagerWork)))


def slot_eager(slot: Slot, families: Mapping[str, FamilyIR]) -> EagerWork | None:
    """Return what the family bound to `slot` declares its module dispatches; None when no count holds for it."""
    family = families.get(slot.family)
    if family is None or not any(cost.unit == EAGER for cost in family.costs):
        return None
    terms = slot_terms(slot, families, EAGER)
    # A module dispatches something: where no `calls` term holds for this config, the family's counts
    # do not describe it (a variant they were not counted for), and the column is priced without them.
    return _summed(terms) if any(t.name == "calls" and t.t for t in terms) else None


def _summed(terms: Iterable[DeclaredTerm]) -> EagerWork:
    work = EagerWork()
    for term in terms:
        if term.name == "calls":
            work += EagerWork(calls=term.t)
        elif term.replicated:
            work += EagerWork(whole=term.t, per_key=term.ts)
        elif term.sequence:
            work += EagerWork(sequence=term.t, per_key=term.ts)
        else:
            work += EagerWork(split=term.t, per_key=term.ts)
    return work


def all_declared(slots: Iterable[Slot], families: Mapping[str, FamilyIR]) -> EagerWork | None:
    """Return the slots' work summed, or None when one of them declares none."""
    total = EagerWork()
    for slot in slots:
        work = slot_eager(slot, families)
        if work is None:
            return None
        total += work
    return total


def layer_eager(cfg: LayerConfig, bindings: Mapping[str, str], families: Mapping[str, FamilyIR]) -> EagerWork | None:
    """Return a layer's eager work: its slots' declarations and its residual adds (None: a slot declares none)."""
    slots = layer_slots(cfg, bindings)
    work = all_declared(slots, families) if slots else None
    if work is None:
        return None
    attentions, matrices = layer_shape(cfg)
    # One add per block, whatever the wiring: a parallel block's x + mixer(n) + ffn(n) is two adds too.
    adds = len(wiring.blocks(int(attentions), matrices > 0, cross=crosses(layer_config(cfg))))
    return work + EagerWork(calls=Fraction(RESIDUAL_CALLS * adds), sequence=Fraction(RESIDUAL_MOVED * adds * cfg.hidden))


def end_eager(ends: Iterable[Slot], families: Mapping[str, FamilyIR], vocab: int, head_family: str = ""
              ) -> tuple[EagerWork | None, EagerWork | None]:
    """Return the (embedding, output) columns' eager work: their slots' declarations, the output's with the loss.

    A tied head (no head slot) runs the embedding's table as a linear: it is priced as `head_family`, the
    family the head role binds, declares its linear on the table's config (None when none is bound).
    """
    ends = tuple(ends)
    embedding = all_declared((s for s in ends if s.path not in OUTPUT_PATHS), families)
    heads = [s for s in ends if s.path in OUTPUT_PATHS]
    if not any(s.path == "head" for s in heads):
        table = next((s for s in ends if s.path == "embed"), None)
        heads = [*heads, Slot("head", "head", table.config, head_family)] if table and head_family else []
    output = all_declared(heads, families) if heads else None
    loss = EagerWork(calls=Fraction(LOSS_CALLS), whole=Fraction(LOSS_MOVED),
                     logits=Fraction(LOSS_MOVED_PER_VOCAB * vocab))
    return embedding, None if output is None else output + loss


__all__ = ["EagerWork", "all_declared", "end_eager", "layer_eager", "slot_eager"]
