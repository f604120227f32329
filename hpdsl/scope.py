"""The symbol table of one compilation, and the profile questions several stages share.

hpdsl/check/scope.py builds a Scope (reporting duplicate names); the checks
look names up in it and lowering (hpdsl/ir/) reads it. The profile helpers
answer what both ask (a profile's kinds, flavours and default), so each is
computed one way. This module sits below both, so neither imports the other
for it.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from hpdsl import ast


SlotBindings = dict[str, ast.SlotBinding]
"""The effective binding of each bound slot, by slot name."""


@attrs.frozen
class Scope:
    """Declarations of all files in scope; the first of duplicate names wins."""

    files: tuple[ast.File, ...]
    vocabulary: ast.Vocabulary | None
    profiles: dict[str, ast.Profile]
    families: dict[str, ast.Family]
    models: dict[str, ast.Model]
    devices: dict[str, ast.Device] = attrs.field(factory=dict)
    clusters: dict[str, ast.Cluster] = attrs.field(factory=dict)
    # Every profile asks for the top-level bindings: found once here, not once per profile
    # (a scan of every file's declarations each time made checking quadratic in profiles).
    top_slots: tuple[ast.SlotsBlock, ...] = attrs.field(init=False, eq=False, repr=False)
    defaults: SlotBindings = attrs.field(init=False, eq=False, repr=False)
    op_names: tuple[str, ...] = attrs.field(init=False, eq=False, repr=False)
    """The vocabulary's op names in declaration order (empty without one)."""

    @top_slots.default
    def _top_slots(self) -> tuple[ast.SlotsBlock, ...]:
        return tuple(item for file in self.files for item in file.items if isinstance(item, ast.SlotsBlock))

    @defaults.default
    def _defaults(self) -> SlotBindings:
        return _overlay({}, self.top_slots, first_wins=True)

    @op_names.default
    def _op_names(self) -> tuple[str, ...]:
        if self.vocabulary is None:
            return ()
        return tuple(dict.fromkeys(op.name.value for op in self.vocabulary.ops))



# --------------------------------------------------------------------------
# Profile questions shared by the checks
# --------------------------------------------------------------------------


def profile_kinds(profile: ast.Profile) -> dict[str, ast.Kind]:
    """Return the profile's kinds by name, first declaration winning."""
    kinds: dict[str, ast.Kind] = {}
    for item in profile.items:
        if isinstance(item, ast.Kind):
            kinds.setdefault(item.name.value, item)
    return kinds


def profile_default(profile: ast.Profile) -> str | None:
    """Return the default kind: the stated one, else the only kind, else None."""
    for item in profile.items:
        if isinstance(item, ast.DefaultKind):
            return item.kind.value
    kinds = profile_kinds(profile)
    return next(iter(kinds)) if len(kinds) == 1 else None


def kind_lineage(kind: ast.Kind, kinds: dict[str, ast.Kind]) -> list[ast.Kind]:
    """Return the kind and its ancestors, nearest first, stopping at a cycle or unknown base."""
    chain = [kind]
    seen = {kind.name.value}
    while chain[-1].base is not None:
        base = kinds.get(chain[-1].base.value)
        if base is None or base.name.value in seen:
            break
        seen.add(base.name.value)
        chain.append(base)
    return chain


def kind_flavours(kind: ast.Kind, kinds: dict[str, ast.Kind]) -> tuple[str, str | None]:
    """Return (attention, ffn) of a kind, inherited from its bases when it states none."""
    attention: str | None = None
    ffn: str | None = None
    for ancestor in kind_lineage(kind, kinds):
        for item in ancestor.items:
            if attention is None and isinstance(item, ast.AttentionFlavour):
                attention = item.value.value
            if ffn is None and isinstance(item, ast.FfnFlavour):
                ffn = item.value.value
    return attention or "full", ffn


def kind_wiring(kind: ast.Kind, kinds: dict[str, ast.Kind]) -> str | None:
    """Return the wiring a kind or its nearest base states (None: the model's)."""
    for ancestor in kind_lineage(kind, kinds):
        for item in ancestor.items:
            if isinstance(item, ast.KindWiring):
                return item.value.value
    return None


def kind_dims(kind: ast.Kind, kinds: dict[str, ast.Kind]) -> dict[str, ast.DimExpr]:
    """Return the fields a kind's `dims { }` set: its bases' overlaid by its own, by field name."""
    dims: dict[str, ast.DimExpr] = {}
    for ancestor in reversed(kind_lineage(kind, kinds)):
        for item in ancestor.items:
            if isinstance(item, ast.KindDims):
                dims.update((entry.field.value, entry.value) for entry in item.entries)
    return dims


def kind_vector(kind: ast.Kind, kinds: dict[str, ast.Kind]) -> dict[str, ast.OpCount]:
    """Return the op counts a kind has: its bases' overlaid by its own, by op name."""
    vector: dict[str, ast.OpCount] = {}
    for ancestor in reversed(kind_lineage(kind, kinds)):
        for item in ancestor.items:
            if isinstance(item, ast.OpsBlock):
                for count in item.counts:
                    vector[count.op.value] = count
    return vector


DEFAULT_PROFILE = "default"
"""The profile a model that names none is priced with."""


def model_profile(model: ast.Model) -> str:
    """Return the name of the profile a model names, or the default one."""
    return model.profile.value if model.profile else DEFAULT_PROFILE


# --------------------------------------------------------------------------
# Slot bindings: top-level defaults, overlaid by a profile's, then a kind's
# --------------------------------------------------------------------------

def top_level_slots(scope: Scope) -> list[ast.SlotsBlock]:
    """Return every top-level slots block in scope, in file order."""
    return list(scope.top_slots)


def _overlay(base: SlotBindings, blocks: Iterable[ast.SlotsBlock], *, first_wins: bool = False,
             ) -> SlotBindings:
    bindings = dict(base)
    for block in blocks:
        for binding in block.bindings:
            if not (first_wins and binding.slot.value in bindings):
                bindings[binding.slot.value] = binding
    return bindings


def default_slots(scope: Scope) -> SlotBindings:
    """Return the top-level bindings: every profile's defaults (the first binding of a slot wins)."""
    return dict(scope.defaults)


def profile_slots(profile: ast.Profile, scope: Scope) -> SlotBindings:
    """Return a profile's effective bindings: the top-level defaults overlaid by its own blocks."""
    own = [item for item in profile.items if isinstance(item, ast.SlotsBlock)]
    return _overlay(default_slots(scope), own)


def kind_slots(kind: ast.Kind, kinds: dict[str, ast.Kind], profile: SlotBindings) -> SlotBindings:
    """Return a kind's effective bindings: the profile's, overlaid by its bases' and then its own."""
    blocks = [item for ancestor in reversed(kind_lineage(kind, kinds)) for item in ancestor.items
              if isinstance(item, ast.SlotsBlock)]
    return _overlay(profile, blocks)
