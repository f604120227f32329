"""The op vocabulary and checked profiles into IR: complete vectors, flavours, run, facts and slots.

Lowering assumes check_profiles found no error: every kind's vector is complete
after inheritance and every setting has the type its table asks for. It reads
inheritance and defaults through hpdsl/scope.py, the helpers the checks used.
"""

from __future__ import annotations

from typing import Literal, Optional, cast

from hpdsl import ast
from hpdsl.ir.layouts import dim_from_ast
from hpdsl.ir.lower_fields import lower_fields
from hpdsl.ir.nodes import (DimIR, FactsIR, ImportRulesIR, KindIR, OpInfo, ProfileIR, RunFacts, Scalar, SourceRef,
                            TranslatedValue, WeightRuleIR)
from hpdsl.model.slots import SLOTS
from hpdsl.scope import (Scope, SlotBindings, kind_dims, kind_flavours, kind_slots, kind_vector, kind_wiring,
                         profile_default,
                         profile_kinds, profile_slots)


def lower_vocabulary(scope: Scope) -> tuple[OpInfo, ...]:
    """Return the vocabulary's ops in declaration order (empty without a vocabulary)."""
    if scope.vocabulary is None:
        return ()
    infos: dict[str, OpInfo] = {}
    for op in scope.vocabulary.ops:
        infos.setdefault(op.name.value, OpInfo(op.name.value, str(op.meaning.value)))
    return tuple(infos.values())


def lower_profile(profile: ast.Profile, scope: Scope) -> ProfileIR:
    """Return the IR of one checked profile."""
    kinds = profile_kinds(profile)
    blocks = [item for item in profile.items if isinstance(item, ast.SettingsBlock)]
    model = _settings(blocks, "model")
    v_head_dim = model.get("v_head_dim")
    slots = profile_slots(profile, scope)
    return ProfileIR(
        name=profile.name.value,
        kinds={name: _lower_kind(kind, kinds, scope.op_names, slots) for name, kind in kinds.items()},
        default=profile_default(profile),
        run=RunFacts(**_settings(blocks, "run")),  # unstated facts at their defaults
        v_head_dim=int(v_head_dim) if v_head_dim is not None else None,
        model_types=_model_types(profile),
        facts=tuple(_lower_facts(block) for block in blocks if block.block == "facts"),
        slots=_families(slots),
        imports=tuple(lower_import_rules(item) for item in profile.items if isinstance(item, ast.ImportRules)),
        fields=lower_fields(profile.items),
        source=SourceRef.from_span(profile.name.span),
    )


def lower_profiles(scope: Scope) -> dict[str, ProfileIR]:
    """Return the IR of every profile in scope, by name, in scope order."""
    return {name: lower_profile(profile, scope) for name, profile in scope.profiles.items()}


def _lower_kind(kind: ast.Kind, kinds: dict[str, ast.Kind], ops: tuple[str, ...],
                profile_bindings: SlotBindings) -> KindIR:
    vector = kind_vector(kind, kinds)
    attention, ffn = kind_flavours(kind, kinds)
    return KindIR(
        name=kind.name.value,
        # vocabulary order, whatever order the source counted them in
        ops={op: int(vector[op].count.value) for op in ops},
        # the checks admit only ATTENTION_FLAVOURS and FFN_FLAVOURS (hpdsl/model/slots.py)
        # (the types as strings: subscripting Literal at run time cost more than the rest of the kind)
        attention=cast('Literal["full", "linear", "sliding", "ssm", "cross"]', attention),
        ffn=cast('Optional[Literal["dense", "moe"]]', ffn),  # noqa: UP007
        base=kind.base.value if kind.base is not None else None,
        wiring=kind_wiring(kind, kinds),
        dims={name: dim_from_ast(expr) for name, expr in kind_dims(kind, kinds).items()},
        slots=_families(kind_slots(kind, kinds, profile_bindings)),
        source=SourceRef.from_span(kind.name.span),
    )


def _families(bindings: SlotBindings) -> dict[str, str]:
    """Return slot → family in hpdsl.model.slots.SLOTS order, whatever order the source bound them in."""
    return {slot: bindings[slot].family.value for slot in SLOTS if slot in bindings}


def _settings(blocks: list[ast.SettingsBlock], which: str) -> dict[str, Scalar]:
    return {s.key.value: s.value.value for block in blocks if block.block == which
            for s in block.settings}


def _model_types(profile: ast.Profile) -> tuple[str, ...]:
    listed = (str(t.value) for item in profile.items if isinstance(item, ast.ModelTypes)
              for t in item.types)
    return tuple(dict.fromkeys(listed))


def _lower_facts(block: ast.SettingsBlock) -> FactsIR:
    return FactsIR(model_types=tuple(str(t.value) for t in block.types),
                   values={s.key.value: s.value.value for s in block.settings})


def _weight_rule(rule: ast.HfWeight) -> WeightRuleIR:
    """Return the IR of one `weight` rule, a split's parts and sizes with it."""
    split = rule.split
    sources = tuple(str(source.value) for source in rule.join)
    if split is None:
        return WeightRuleIR(str(rule.source.value), str(rule.target.value), rule.transposed, sources=sources)
    return WeightRuleIR(str(rule.source.value), str(rule.target.value), rule.transposed,
                        parts=tuple(str(part.value) for part in split.targets),
                        sizes=tuple(dim_from_ast(size) for size in split.sizes),
                        groups=None if split.groups is None else dim_from_ast(split.groups), sources=sources)


def lower_import_rules(block: ast.ImportRules) -> ImportRulesIR:
    """Return the IR of one checked `hf { ... }` block, its rules in source order."""
    defaults: dict[str, Scalar | None] = {}
    maps: dict[str, str] = {}
    reads: list[str] = []
    ignored: dict[str, str] = {}
    ignored_at: dict[str, Scalar] = {}
    patterns: dict[str, dict[str, str]] = {}
    derives: dict[str, DimIR] = {}
    weights: list[WeightRuleIR] = []
    unmodelled: dict[str, str] = {}
    translations: dict[str, tuple[TranslatedValue, ...]] = {}
    for rule in block.rules:
        if isinstance(rule, ast.HfDefault):
            defaults[rule.key.value] = None if rule.value is None else rule.value.value
        elif isinstance(rule, ast.HfMap):
            field = rule.field.value if rule.block is None else f"{rule.block.value}.{rule.field.value}"
            maps[rule.key.value] = field
            if rule.values:
                translations[rule.key.value] = tuple(TranslatedValue(v.stated.value, v.value.value) for v in rule.values)
        elif isinstance(rule, ast.HfRead):
            reads.extend(key.value for key in rule.keys)
        elif isinstance(rule, ast.HfIgnore):
            for entry in rule.keys:
                key = str(entry.key.value)
                if rule.unmodelled:  # refused naming the construct, unless null or at its value
                    unmodelled[key] = str(rule.reason.value)
                    if entry.value is not None:
                        ignored_at[key] = entry.value.value
                elif entry.value is None:
                    ignored[key] = str(rule.reason.value)
                else:
                    ignored_at[key] = entry.value.value
        elif isinstance(rule, ast.HfPattern):
            patterns[rule.key.value] = {str(s.symbol.value): s.kind.value for s in rule.symbols}
        elif isinstance(rule, ast.HfWeight):
            weights.append(_weight_rule(rule))
        else:
            derives[rule.field.value] = dim_from_ast(rule.value)
    return ImportRulesIR(model_types=tuple(str(t.value) for t in block.types), defaults=defaults,
                         maps=maps, reads=tuple(dict.fromkeys(reads)), ignored=ignored,
                         ignored_at=ignored_at, patterns=patterns, derives=derives,
                         weights=tuple(weights), unmodelled=unmodelled, translations=translations)
