"""Slot bindings into diagnostics: slot and family names, repeats, kind scope, completeness.

A `slots { SLOT FAMILY ... }` block binds slots of hpdsl.model.slots.SLOTS to
families in scope: at the top level (every profile's defaults, each slot bound
once across all files), in a profile, or in a kind. The effective bindings are
merged by the helpers of check.scope, the same ones the lowering uses.
Nothing here raises: each problem is reported and the check goes on.
"""

from __future__ import annotations

from collections.abc import Iterator

from hpdsl import ast
from hpdsl.diagnostics import did_you_mean
from hpdsl.scope import Scope, kind_flavours, kind_wiring, model_profile, profile_kinds, profile_slots, top_level_slots
from hpdsl.diagnostics import Collector, Note
from hpdsl.model.slots import SLOTS
from hpdsl.resources import STDLIB_PREFIX

_NO_STDLIB = "keep the standard library in scope (leave out --no-stdlib)"


def check_slots(scope: Scope, collector: Collector) -> None:
    """Report every problem with the slots blocks in scope and every profile left incomplete."""
    _check_top_level(scope, collector)
    for profile in scope.profiles.values():
        for block in _blocks(profile.items):
            _check_block(block, scope, collector)
        for kind in (item for item in profile.items if isinstance(item, ast.Kind)):
            for block in _blocks(kind.items):
                _check_block(block, scope, collector, kind=kind)
    _check_complete(scope, collector)


def _blocks(items: tuple[object, ...]) -> Iterator[ast.SlotsBlock]:
    return (item for item in items if isinstance(item, ast.SlotsBlock))


# --------------------------------------------------------------------------
# Each block
# --------------------------------------------------------------------------


def _check_top_level(scope: Scope, collector: Collector) -> None:
    """Check the top-level blocks: one default binding per slot, across every file."""
    first: dict[str, tuple[ast.SlotsBlock, ast.SlotBinding]] = {}
    for block in top_level_slots(scope):
        for binding in block.bindings:
            _check_names(binding, scope, collector)
            slot = binding.slot.value
            if slot not in first:
                first[slot] = (block, binding)
            elif first[slot][0] is block:
                _twice_in_block(binding, first[slot][1], collector)
            else:
                _second_default(binding, first[slot][1], collector)


def _second_default(binding: ast.SlotBinding, first: ast.SlotBinding, collector: Collector) -> None:
    slot = binding.slot.value
    if first.span.file.startswith(STDLIB_PREFIX):
        where = f" in the standard library ({first.span.file})"
        hint = ("override it in a profile's or a kind's slots block, or compile with --no-stdlib "
                "and state every default binding yourself")
    else:
        where = ""
        hint = "remove one of the two, or override the slot in a profile's or a kind's slots block"
    collector.error(binding.slot.span, "duplicate-slot",
                    f"slot '{slot}' already has a default binding{where}; the top-level slots "
                    "blocks of all files bind each slot once", hint=hint,
                    notes=(Note(first.span, "the first default binding"),))


def _check_block(block: ast.SlotsBlock, scope: Scope, collector: Collector, *,
                 kind: ast.Kind | None = None) -> None:
    first: dict[str, ast.SlotBinding] = {}
    for binding in block.bindings:
        _check_names(binding, scope, collector)
        slot = binding.slot.value
        if slot in first:
            _twice_in_block(binding, first[slot], collector)
        first.setdefault(slot, binding)
        spec = SLOTS.get(slot)
        if kind is not None and spec is not None and spec.scope == "model":
            collector.error(binding.slot.span, "model-slot-in-kind",
                            f"kind '{kind.name.value}' binds slot '{slot}', but a model has one "
                            f"{slot}, not one per layer",
                            hint="bind it in the profile's slots block, or at the top level")


def _twice_in_block(binding: ast.SlotBinding, first: ast.SlotBinding, collector: Collector) -> None:
    collector.error(binding.slot.span, "duplicate-slot",
                    f"slot '{binding.slot.value}' is bound twice in this slots block",
                    hint="keep one binding", notes=(Note(first.span, "first bound here"),))


def _check_names(binding: ast.SlotBinding, scope: Scope, collector: Collector) -> None:
    slot, family = binding.slot, binding.family
    if slot.value not in SLOTS:
        collector.error(slot.span, "unknown-slot", f"'{slot.value}' is not a slot",
                        hint=did_you_mean(slot.value, SLOTS))
    if family.value not in scope.families:
        hint = did_you_mean(family.value, scope.families) if scope.families else (
            f"declare `family {family.value} {{ ... }}`, or {_NO_STDLIB}")
        collector.error(family.span, "unknown-family",
                        f"slot '{slot.value}' is bound to family '{family.value}', which is "
                        "not declared", hint=hint)


# --------------------------------------------------------------------------
# Completeness
# --------------------------------------------------------------------------


def _check_complete(scope: Scope, collector: Collector) -> None:
    """Report each profile a model uses that leaves a slot unbound.

    Reported once at the profile, with a note at the first model using it: the
    fix belongs in the profile (or a top-level block), and a profile no model
    uses may leave slots open, as a library of kinds priced but never built.
    """
    users: dict[str, list[ast.Model]] = {}
    for model in scope.models.values():
        users.setdefault(model_profile(model), []).append(model)
    for name, models in users.items():
        profile, model = scope.profiles.get(name), models[0]
        if profile is None:
            continue  # the model check reports the unknown profile
        bound = profile_slots(profile, scope)
        missing = [slot for slot in SLOTS if slot not in bound and _needed(slot, profile, models)]
        if not missing:
            continue
        if not any(slot in bound for slot in SLOTS):
            what = "binds no slot to a family (no slots block in it or at the top level)"
        else:
            listed = ", ".join(f"'{slot}'" for slot in missing)
            what = f"leaves slot{'s' * (len(missing) > 1)} {listed} without a family"
        collector.error(profile.name.span, "unbound-slot",
                        f"profile '{name}' {what}, but model '{model.name.value}' is built from it",
                        hint=f"bind {'it' if len(missing) == 1 else 'them'} in a `slots {{ ... }}` block in the profile or at the top "
                             f"level, e.g. `slots {{ {missing[0]} FAMILY }}`, or {_NO_STDLIB}",
                        notes=(Note(model.name.span, "a model using the profile"),))


def _needed(slot: str, profile: ast.Profile, models: list[ast.Model]) -> bool:
    """Whether a model of `profile` may build `slot`.

    The ssm slot only under a kind with `attention ssm`; a MoE block's router and shared
    gate only where a kind states `ffn moe` or a model of the profile has a `moe` block; a
    wiring's slots only under a kind so wired; T5's position_bias only where a model states
    position_buckets.
    """
    kinds = profile_kinds(profile)
    if slot in MOE_SLOTS:
        return any(kind_flavours(kind, kinds)[1] == "moe" for kind in kinds.values()) or any(
            block.name.value == "moe" for model in models for block in model.items if isinstance(block, ast.Block))
    if slot in OPTIONAL_SLOTS:
        return any(kind_flavours(kind, kinds)[0] == OPTIONAL_SLOTS[slot] for kind in kinds.values())
    if slot in WIRED_SLOTS:
        return any(kind_wiring(kind, kinds) == WIRED_SLOTS[slot] for kind in kinds.values())
    if slot in FIELD_SLOTS:
        return any(isinstance(item, ast.Field) and item.name.value == FIELD_SLOTS[slot]
                   for model in models for item in model.items)
    if slot in BLOCK_FIELD_SLOTS:
        block_name, field = BLOCK_FIELD_SLOTS[slot]
        return any(isinstance(block, ast.Block) and block.name.value == block_name
                   and any(item.name.value == field for item in block.fields)
                   for model in models for block in model.items)
    return True


OPTIONAL_SLOTS = {"ssm": "ssm", "cross_attention": "cross"}
"""Slots added after the first profiles were written → the attention flavour that builds them: a
profile without such a kind need not bind them (a --no-stdlib profile of attention layers)."""

MOE_SLOTS = ("router", "shared_gate")
"""Slots only a mixture-of-experts block builds (added after the first profiles were written)."""

WIRED_SLOTS = {"gate": "gated"}
"""Slots a kind's wiring builds → that wiring: a profile with no kind so wired need not bind them (a model
that states `wiring gated` itself under such a profile is refused at build: no family fills the gates)."""

FIELD_SLOTS = {"position_bias": "position_buckets", "project_in": "embed_width", "project_out": "embed_width",
               "mtp_proj": "mtp", "per_layer_input": "per_layer_width", "per_layer_proj": "per_layer_width",
               "hyper_connection": "hc_mult", "hyper_head": "hc_mult"}
"""Slots a model field builds → that field: only a model stating it needs the slot bound (T5's bias tables;
the outer wiring's projections, docs/language.md "The model's outer wiring"; the MTP layers' projection;
Gemma 4's per-layer inputs; DeepSeek-V4's hyper-connections)."""

BLOCK_FIELD_SLOTS = {"latent_proj": ("moe", "latent_width")}
"""Slots a block's field builds → (block, field): only a model stating it needs the slot bound (a MoE block's
latent projections, Nemotron 3 Super's)."""


__all__ = ["check_slots"]
