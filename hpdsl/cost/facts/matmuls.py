"""A slot and the module families in scope into its weight matmuls: multiply-adds per token, by FLOP term.

The estimator prices the weight matmuls of every slot from the `layout { }` of
the family bound to it, as it prices the parameters (hpdsl/cost/facts/params.py);
no formula of any one module is written here. What counts as a weight matmul is
derived from the layout, with no marker (docs/cost-model.md, "Weight matmuls
from the layouts"):

- a present entry that is a module's `weight` (the last name of its path) of
  rank ≥ 2 is one: a Linear's [out, in] multiplies each token once (its numel
  multiply-adds per token), a convolution's [out, in / groups, K] too (a
  depthwise one's K taps per channel);
- in the `experts` slot an entry of rank ≥ 3 is a bank of per-expert matrices
  [experts, ...]: each token runs top_k of them, numel · top_k / experts;
- in the `embedding` slot an entry whose first dim reads `vocab` is a table the
  tokens index: a gather, no multiply-adds. A tied head multiplies by the
  embedding's `weight` (what hpdsl/torch/layers.py reads) instead;
- every other entry (biases, norms' scales, decays, sinks) is no matmul, and a
  norm slot holds none.

Terms: a mixer's rank-2 weights are attMM and its convolutions conv; the
feed-forward slots' ffMM; the head's (or the tied table's) output; an embedding's
own projections embedding; an MTP layer's projection (the mtp_proj slot) mtp.
Placement, as hpdsl/cost/facts/replication.py reads the layouts: a slot that
replicates every entry is priced split (t), and the replication facts run a
whole mixer on every tp rank; otherwise a colwise or
rowwise entry is split over tp and a replicated one (MLA's latent
down-projections) runs on every tp rank, divided by sp only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

import attrs

from hpdsl.bound.config import dim_environment
from hpdsl.bound.bind import CostModel, LayerConfig
from hpdsl.bound.slots import Slot, layer_slots
from hpdsl.bound.tally import WHOLE_AXES, priced_variant
from hpdsl.cost.facts.cost_terms import DeclaredTerm, layer_terms, slot_terms
from hpdsl.cost.facts.params import UnpricedSlotError
from hpdsl.cost.facts.replication import SHARDED_PLACEMENTS
from hpdsl.cost.facts.roles import MIXER_ROLES
from hpdsl.ir.layouts import dim_names, entry_numel, layout_for
from hpdsl.ir.nodes import FamilyIR, LayoutEntryIR

FFN_ROLES = frozenset({"mlp", "experts", "shared_experts", "latent_proj", "per_layer_input"})
"""Slot roles of a layer's feed-forward block (and the per-layer input block after it, Gemma 4's PLE): their
weight matmuls are the ffMM term."""


@attrs.frozen
class Macs:
    """Weight multiply-adds per token: split over tp, and run whole on every tp rank."""

    split: Fraction = Fraction(0)
    replicated: Fraction = Fraction(0)

    def __add__(self, other: Macs) -> Macs:
        return Macs(self.split + other.split, self.replicated + other.replicated)

    @property
    def total(self) -> Fraction:
        """Return the multiply-adds per token, wherever they run."""
        return self.split + self.replicated


@attrs.frozen
class Matmuls:
    """A column's weight multiply-adds per token, by FLOP term (attMM, conv, ffMM, output, embedding).

    `declared` rides with them: what the column's slots compute beside their
    weights, from their families' `cost { }` blocks, each run as the kind counts it.
    """

    by_term: tuple[tuple[str, Macs], ...] = ()
    declared: tuple[DeclaredTerm, ...] = ()  # the slots' families' cost terms (hpdsl/cost/facts/cost_terms.py)

    def of(self, term: str) -> Macs:
        """Return the multiply-adds of `term` (none when the column has no such matmul)."""
        return next((macs for name, macs in self.by_term if name == term), Macs())


def slot_matmuls(slot: Slot, families: Mapping[str, FamilyIR]) -> dict[str, Macs]:
    """Return the weight multiply-adds per token the layout of the family bound to `slot` declares, by term.

    An unpriceable slot (no family, no layout, dims it cannot evaluate) has no
    matmuls here: hpdsl/cost/facts/params.py refuses it, naming the slot.
    """
    family = families.get(slot.family)
    if family is None or not family.layout or slot.role == "norm":
        return {}
    env = {**dim_environment(slot.config), **WHOLE_AXES}
    entries = layout_for(family, priced_variant(family, slot.config))
    whole = all(entry.placement not in SHARDED_PLACEMENTS for entry in entries.values())
    out: dict[str, Macs] = {}
    for path, entry in entries.items():
        term, share = _entry_term(slot, path, entry)
        numel = entry_numel(entry, env) if term else None
        if not numel:
            continue
        macs = Fraction(numel) * share
        placed = Macs(split=macs) if whole or entry.placement in SHARDED_PLACEMENTS else Macs(replicated=macs)
        out[term] = out.get(term, Macs()) + placed
    return out


def _entry_term(slot: Slot, path: str, entry: LayoutEntryIR) -> tuple[str, Fraction]:
    """Return the term an entry's multiply-adds price ("" when it is no matmul) and its share per token."""
    rank, is_weight = len(entry.dims), path.split(".")[-1] == "weight"
    if slot.role == "experts" and rank >= 3:
        experts = slot.config.experts or 1
        return "ffMM", Fraction(slot.config.top_k, experts)
    if not is_weight or rank < 2:
        return "", Fraction(0)
    if slot.role == "embedding":
        return ("", Fraction(0)) if "vocab" in dim_names(entry.dims[0]) else ("embedding", Fraction(1))
    if slot.role in MIXER_ROLES:
        return ("conv" if rank >= 3 else "attMM"), Fraction(1)
    if slot.role in FFN_ROLES:
        return "ffMM", Fraction(1)
    return _ROLE_TERMS.get(slot.role, ""), Fraction(1 if slot.role in _ROLE_TERMS else 0)


_ROLE_TERMS = {"head": "output", "mtp_proj": "mtp", "per_layer_proj": "embedding"}
"""The term of every rank-2 weight of the head's, an MTP projection's and the per-layer inputs' projection's slots."""


def tied_head_matmuls(slot: Slot, families: Mapping[str, FamilyIR]) -> dict[str, Macs]:
    """Return a tied head's multiply-adds per token: the embedding family's `weight`, read as the head's matrix.

    A tied head reads the embedding module's `weight` (hpdsl/torch/layers.py
    `output_logits`); an embedding family whose layout has none cannot be tied.
    """
    family = families.get(slot.family)
    if family is None or not family.layout:
        return {}  # unpriced: hpdsl/cost/facts/params.py refuses the slot, naming it
    entry = layout_for(family, priced_variant(family, slot.config)).get("weight")
    if entry is None:
        raise UnpricedSlotError(f"{slot.path}: the model ties its head to the embedding, but the embedding "
                                f"family '{slot.family}' declares no `weight` for the head to multiply by; "
                                "name the table `weight` in its layout, or untie the head (remove tie_embeddings)")
    numel = entry_numel(entry, {**dim_environment(slot.config), **WHOLE_AXES})
    if not numel:
        return {}
    sharded = entry.placement in SHARDED_PLACEMENTS
    return {"output": Macs(split=Fraction(numel)) if sharded else Macs(replicated=Fraction(numel))}


def layer_matmuls(cfg: LayerConfig, bindings: Mapping[str, str], families: Mapping[str, FamilyIR]) -> Matmuls:
    """Return the weight multiply-adds per token of one layer priced with `cfg`: its slots' layouts, summed.

    The op counts decide which slots the layer builds (hpdsl/bound/slots.py:
    attMM 4 one mixer, 8 a mixer and a cross-attention, 0 none; ffMM 3 a gated
    feed-forward, 2 a plain one, 0 none); the layouts price what they build.
    """
    slots = layer_slots(cfg, bindings)
    declared = layer_terms(cfg.ops, (slot_terms(slot, families) for slot in slots))
    return attrs.evolve(_summed(slot_matmuls(slot, families) for slot in slots), declared=declared)


def with_slots(matmuls: Matmuls, slots: Iterable[Slot], families: Mapping[str, FamilyIR]) -> Matmuls:
    """Return `matmuls` plus the weight multiply-adds of `slots` (an MTP layer's, beside its decoder layer's)."""
    total = _summed([dict(matmuls.by_term), *(slot_matmuls(slot, families) for slot in slots)])
    return attrs.evolve(total, declared=matmuls.declared)


def end_matmuls(cost_model: CostModel, ends: Iterable[Slot],
                families: Mapping[str, FamilyIR]) -> tuple[Matmuls, Matmuls]:
    """Return the (embedding, output) columns' weight multiply-adds per token from the model-level slots."""
    ends = tuple(ends)
    embedding = _summed(slot_matmuls(s, families) for s in ends if s.role in ("embedding", "project_in", "per_layer_proj"))
    head = [slot_matmuls(s, families) for s in ends if s.role in ("head", "project_out")]
    if cost_model.model.tie_embeddings:
        head = [*(tied_head_matmuls(s, families) for s in ends if s.path == "embed"),
                *(slot_matmuls(s, families) for s in ends if s.role == "project_out")]
    return embedding, _summed(head)


def _summed(parts: Iterable[dict[str, Macs]]) -> Matmuls:
    total: dict[str, Macs] = {}
    for part in parts:
        for term, macs in part.items():
            total[term] = total.get(term, Macs()) + macs
    return Matmuls(tuple(sorted(total.items())))


__all__ = ["FFN_ROLES", "Macs", "Matmuls", "end_matmuls", "layer_matmuls", "slot_matmuls", "tied_head_matmuls",
           "with_slots"]
