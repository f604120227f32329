"""The bound cost IR and its module families into exact parameter counts: per layer, per kind, per group, per model.

Every slot's parameters are the sum of the layout entries of the family bound
to it (hpdsl/bound/tally.py): the mixer (attention, mla, gated_delta_net, an ssm
family), the feed-forward (mlp; a MoE block's router, routed experts, each
shared expert and their gate), every norm, the embedding, a learned position
table, T5's relative-position bias tables, the head and what an MTP layer holds
beside its decoder layer (its norms and its 2h→h projection, the mtp_proj slot).
No slot is priced by a formula here; the torch backend builds each slot through
the same family and refuses a module that differs from its layout, so the
estimate equals the built count by construction (docs/cost-model.md,
"Parameters"). A model bound without families is priced with the standard ones
(families/*.hpf).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from functools import cache
from typing import Any

import attrs

from hpdsl.bound.bind import CostModel, LayerConfig
from hpdsl.bound.slots import Slot, end_slots, kind_bindings, layer_slots, mtp_slots
from hpdsl.bound.tally import slot_tally
from hpdsl.cost.facts.roles import MIXER_ROLES  # the report's `attention`: a mixer's (and a cross-attention's) roles
from hpdsl.errors import HpdslError
from hpdsl.ir.nodes import FamilyIR, ModelIR

Number = int | float


NORM_SUBMODULES = ("q_norm", "k_norm")
"""A mixer's per-head QK norms: replicated on every tp rank like the layer's norms, so reported with them."""


@attrs.frozen(auto_exc=True)
class UnpricedSlotError(HpdslError):
    """A slot's family has no layout, or its layout cannot be evaluated on the model's dims."""


@attrs.frozen
class LayerParams:
    """The parameters of one layer, split the way sharding treats them."""

    attention: Number
    norms: Number
    dense_ffn: Number
    router: Number
    routed: Number
    shared: Number
    per_expert: Number
    experts: int
    top_k: int

    @property
    def non_expert(self) -> Number:
        """Return what every rank of the expert-parallel group holds whole."""
        return self.attention + self.norms + self.dense_ffn + self.router

    @property
    def total(self) -> Number:
        """Return all the layer's parameters."""
        return self.non_expert + self.routed + self.shared

    @property
    def active(self) -> Number:
        """Return the parameters one token runs through (top-k of the routed experts)."""
        return self.total - (self.experts - self.top_k) * self.per_expert if self.routed else self.total


@attrs.frozen
class GroupParams:
    """One layer group's parameters: per layer and in all."""

    kind: str | None
    count: int
    mtp: bool
    per_layer: Number
    total: Number
    active: Number


@attrs.frozen
class ParamReport:
    """A model's parameter counts; `total` and `active` exclude MTP layers.

    `mtp_extra` is what one MTP layer adds to its decoder layer (its three norms and projection: its mtp slots).
    """

    total: Number
    active: Number
    embedding: Number
    output: Number
    final_norms: Number
    positions: Number
    body: Number
    mtp: Number
    per_kind: dict[str, LayerParams]
    groups: tuple[GroupParams, ...]
    mtp_extra: Number = 0

    def to_json(self) -> dict[str, Any]:
        """Return the report as `hpdsl estimate --json` prints it under "params"."""
        return {
            "total": self.total, "active": self.active, "embedding": self.embedding,
            "output": self.output, "final_norms": self.final_norms, "positions": self.positions,
            "body": self.body, "mtp": self.mtp,
            "per_kind": {name: _layer_json(p) for name, p in self.per_kind.items()},
            "groups": [attrs.asdict(g) for g in self.groups],
        }


def parameters(cost_model: CostModel) -> ParamReport:
    """Count a bound model's parameters exactly, slot by slot from the families' layouts."""
    model, base = cost_model.model, cost_model.base
    families = pricing_families(cost_model)
    per_kind = {name: layer_params(cost_model.kind_config(name), pricing_bindings(cost_model, name), families)
                for name in cost_model.kinds}
    extra = mtp_extra(cost_model, families) if any(g.mtp for g in model.groups) else 0
    groups = []
    for group in model.groups:
        layer = per_kind.get(group.kind) or layer_params(base, pricing_bindings(cost_model, None), families)
        per_layer = layer.total + (extra if group.mtp else 0)
        groups.append(GroupParams(group.kind, group.count, group.mtp, _exact(per_layer),
                                  _exact(per_layer * group.count), _exact(layer.active * group.count)))
    ends = {slot.path: slot_params(slot, families) for slot in _end_slots(cost_model)}
    # The outer wiring's slots (hpdsl/bound/slots.py end_slots): project_in and an embedding norm are
    # reported with the embedding, project_out with the output head, T5's bias tables with the positions;
    # what makes the per-layer inputs (Gemma 4's PLE: table, projection, norm) with the embedding.
    embedding = ends["embed"] + ends.get("project_in", 0) + ends.get("embed_norm", 0) + \
        sum(ends.get(path, 0) for path in ("per_layer_embed", "per_layer_proj", "per_layer_norm"))
    output = ends.get("head", 0) + ends.get("project_out", 0)
    final_norms = towers(model) * ends.get("norm", 0) + ends.get("hc_head", 0)  # DeepSeek-V4's stream collapse
    positions = ends.get("positions", 0) + sum(slot_params(slot, families) for slot in _end_slots(cost_model)
                                               if slot.role == "position_bias")
    body = sum(g.total for g in groups if not g.mtp)
    static = embedding + output + final_norms + positions
    return ParamReport(
        total=_exact(static + body),
        active=_exact(static + sum(g.active for g in groups if not g.mtp)),
        embedding=embedding, output=output, final_norms=final_norms, positions=positions,
        body=_exact(body), mtp=_exact(sum(g.total for g in groups if g.mtp)),
        per_kind=per_kind, groups=tuple(groups), mtp_extra=extra)


def towers(model: ModelIR) -> int:
    """Return the model's towers: 2 for an encoder-decoder (a final norm each), else 1."""
    return 2 if {"encoder", "decoder"} <= {g.kind for g in model.groups} else 1


def layer_params(cfg: LayerConfig, bindings: Mapping[str, str], families: Mapping[str, FamilyIR]) -> LayerParams:
    """Return the exact parameters of one layer priced with `cfg`: the sum of its slots' layouts (router and gate among them)."""
    parts = dict.fromkeys(("attention", "norms", "dense_ffn", "router", "routed", "shared"), 0)
    for slot in layer_slots(cfg, bindings):
        for part, count in _slot_parts(slot, families):
            parts[part] += count
    if cfg.experts <= 1:
        return LayerParams(parts["attention"], parts["norms"], parts["dense_ffn"], 0, 0, 0, 0, 1, 1)
    routed = parts["routed"]
    return LayerParams(parts["attention"], parts["norms"], parts["dense_ffn"], parts["router"], routed,
                       parts["shared"], _exact(Fraction(routed, cfg.experts)), cfg.experts, cfg.top_k)


def mtp_extra(cost_model: CostModel, families: Mapping[str, FamilyIR] | None = None) -> int:
    """Return what an MTP layer adds to its decoder layer: its slots' layouts (two norms, projection, head norm)."""
    families = families or pricing_families(cost_model)
    return sum(slot_params(slot, families) for slot in pricing_mtp_slots(cost_model))


def slot_params(slot: Slot, families: Mapping[str, FamilyIR]) -> int:
    """Return the parameters the layout of the family bound to `slot` declares on the slot's config."""
    tally = slot_tally(slot, families)
    if tally is not None:
        return tally.params
    if slot.family not in families:
        raise UnpricedSlotError(f"{slot.path}: the {slot.role} slot is bound to family '{slot.family}', which is "
                                "not among the families the model is priced with; bind it with its registry's: "
                                "bind(model, profile, families=registry.families)")
    raise UnpricedSlotError(f"{slot.path}: the {slot.role} slot's family '{slot.family}' has no layout that "
                            "prices it on this model's dims; give the family a `layout { }` over the "
                            "slot config's names (docs/language.md, \"Layouts\")")


def pricing_families(cost_model: CostModel) -> Mapping[str, FamilyIR]:
    """Return the families a model's slots are priced with: its registry's, else the standard ones."""
    return cost_model.families or _standard()[0]


def pricing_bindings(cost_model: CostModel, kind: str | None) -> Mapping[str, str]:
    """Return which family fills each slot of `kind`'s layers: the model's bindings (over the standard ones without a registry)."""
    if cost_model.families:
        return kind_bindings(cost_model, kind)
    return {**_standard()[1], **kind_bindings(cost_model, kind)}


def pricing_end_slots(cost_model: CostModel) -> tuple[Slot, ...]:
    """Return the model-level slots (embedding, final norm, positions, head) with the families they are priced with."""
    return _end_slots(cost_model)


def pricing_mtp_slots(cost_model: CostModel) -> tuple[Slot, ...]:
    """Return the slots an MTP layer holds beside its decoder layer, with the families they are priced with."""
    return tuple(_priced(cost_model, s) for s in mtp_slots(cost_model))


def _end_slots(cost_model: CostModel) -> tuple[Slot, ...]:
    return tuple(_priced(cost_model, s) for s in end_slots(cost_model))


def _priced(cost_model: CostModel, slot: Slot) -> Slot:
    """Return `slot` bound as it is priced: its family, else (without a registry) the standard one."""
    if cost_model.families:
        return slot
    return attrs.evolve(slot, family=slot.family or _standard()[1].get(slot.role, ""))


def standard_registry() -> tuple[Mapping[str, FamilyIR], Mapping[str, str]]:
    """Return the shipped families and slot bindings (`_standard`), for a layer priced without a registry."""
    return _standard()


@cache
def _standard() -> tuple[Mapping[str, FamilyIR], Mapping[str, str]]:
    """Return the shipped families (families/*.hpf) and slot bindings (profiles/slots.hpf), compiled once."""
    from hpdsl.api import compile_sources  # the compiler sits above the estimator: imported when first needed

    registry = compile_sources([])
    # every standard profile carries the standard bindings at its top level (profiles/slots.hpf)
    bindings = next(iter(registry.profiles.values())).slots
    return dict(registry.families), dict(bindings)


_PART = {"norm": "norms", "gate": "norms", "mlp": "dense_ffn", "router": "router", "experts": "routed",
         "shared_experts": "shared", "shared_gate": "shared", "latent_proj": "dense_ffn", "per_layer_input": "dense_ffn",
         "hyper_connection": "norms"}
"""The report part of each non-mixer role; a gate is one replicated scalar, reported with the norms; a MoE's
latent projections, which every token runs, and a layer's per-layer input block with the dense feed-forward; a
block's hyper-connection (DeepSeek-V4's mHC, replicated and beside the residual stream) with the norms."""


def _slot_parts(slot: Slot, families: Mapping[str, FamilyIR]) -> list[tuple[str, int]]:
    """Return (report part, parameters) of one slot: a mixer's QK norms go to `norms`, the rest to its role's part."""
    tally = slot_tally(slot, families)
    if tally is None:
        slot_params(slot, families)  # raises, naming the slot
        return []
    if slot.role not in MIXER_ROLES:
        return [(_PART[slot.role], tally.params)]
    norms = sum(n for path, n in tally.by_path if path.split(".")[0] in NORM_SUBMODULES)
    return [("attention", tally.params - norms), ("norms", norms)]


def _exact(value: Number | Fraction) -> Number:
    """Return an int when the value is whole, else a float."""
    fraction = Fraction(value)
    return int(fraction) if fraction.denominator == 1 else float(fraction)


def _layer_json(layer: LayerParams) -> dict[str, Any]:
    return {"attention": layer.attention, "norms": layer.norms, "dense_ffn": layer.dense_ffn,
            "router": layer.router, "routed": layer.routed, "shared": layer.shared,
            "non_expert": layer.non_expert, "total": layer.total, "active": layer.active}
