"""Profiles into diagnostics: statements, kinds, op vectors, flavours and settings blocks.

Every profile in scope is checked against the op vocabulary and the closed
tables of hpdsl/model/. Inheritance is resolved through the helpers of
hpdsl/scope.py, the same ones the lowering uses, so what is checked is what is
lowered. Nothing here raises: each problem is reported and the check goes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar, Union

import attrs

from hpdsl import ast
from hpdsl.check.import_rules import check_import_rules
from hpdsl.check.kind_dims import check_kind_dims
from hpdsl.check.scope import report_duplicates
from hpdsl.diagnostics import Collector, Note, Span, did_you_mean
from hpdsl.model import ops as OP
from hpdsl.model.fields import PROFILE_MODEL_FACTS, RUN_FACTS, WIRINGS, Fact, Field, block_facts, top_level
from hpdsl.model.slots import ATTENTION_FLAVOURS, FFN_FLAVOURS
from hpdsl.scope import Scope, kind_flavours, kind_lineage, kind_vector, profile_kinds

FieldSpec = Union[Field, Fact]

LINEAR_OP = OP.LINREC
"""The op counting linear-attention state updates; it must agree with the attention flavour."""

_Item = TypeVar("_Item")


@attrs.frozen
class _Table:
    """The keys a settings block may state, and the codes its problems are reported under."""

    fields: Mapping[str, FieldSpec]
    unknown: str
    wrong_type: str
    what: str


_TABLES = {
    "run": _Table(RUN_FACTS, "unknown-run-fact", "run-fact-type", "run fact"),
    "model": _Table(PROFILE_MODEL_FACTS, "unknown-model-fact", "model-fact-type", "model fact"),
    # Block flags too (`router_bias`, `shared_gate`) and the moe block's counts: facts of the model type.
    "facts": _Table({**top_level(kinds=("int", "float", "bool", "string", "choice")), **block_facts()},
                    "unknown-hf-fact", "hf-fact-type", "model field"),
}


def check_profiles(scope: Scope, collector: Collector) -> None:
    """Report every problem with the profiles in scope."""
    profiles = list(scope.profiles.values())
    if profiles and scope.vocabulary is None:
        first = profiles[0].name
        collector.error(first.span, "no-vocabulary",
                        f"profile '{first.value}' counts ops, but no op vocabulary is in scope",
                        hint="keep the standard library in scope (leave out --no-stdlib) "
                             "or declare `vocabulary { ... }`")
    for profile in profiles:
        _check_profile(profile, scope, collector)
        check_import_rules(profile, {str(t.value) for t in _listed_types(profile)}, collector)
        check_kind_dims(profile, collector)
    _check_model_type_claims(profiles, collector)


def _check_profile(profile: ast.Profile, scope: Scope, collector: Collector) -> None:
    _check_statements(profile, collector)
    kinds = profile_kinds(profile)
    if not kinds:
        collector.error(profile.name.span, "empty-profile",
                        f"profile '{profile.name.value}' declares no layer kind",
                        hint="add a kind, e.g. `kind decoder { ops { ... } }`")
    declared = _items(profile.items, ast.Kind)
    report_duplicates(((k.name.value, k.name) for k in declared), collector, "duplicate-kind",
                      "kind")
    _check_default(profile, kinds, collector)
    broken = _check_bases(profile, kinds, collector)
    for kind in declared:
        _check_kind_items(kind, scope.op_names, collector)
    for name, kind in kinds.items():
        if name not in broken:
            _check_vector(profile, kind, kinds, scope.op_names, collector)
    _check_settings_blocks(profile, collector)


def _items(items: Iterable[object], cls: type[_Item]) -> list[_Item]:
    return [item for item in items if isinstance(item, cls)]


# --------------------------------------------------------------------------
# Statements that may appear once
# --------------------------------------------------------------------------


_KEYWORDS: dict[type, str] = {
    ast.DefaultKind: "default", ast.ModelTypes: "model_types", ast.OpsBlock: "ops",
    ast.AttentionFlavour: "attention", ast.FfnFlavour: "ffn", ast.KindWiring: "wiring", ast.SlotsBlock: "slots",
    ast.KindDims: "dims"}


def _keyword(item: object) -> str:
    if isinstance(item, ast.SettingsBlock):
        return item.block
    return _KEYWORDS[type(item)]


def _head(item: ast.ProfileItem | ast.KindItem) -> Span:
    """Return the span of the statement's keyword: a caret under a whole block says less."""
    span, word = item.span, _keyword(item)
    return Span(span.file, span.line, span.col, span.line, span.col + len(word))


def _statement_key(item: ast.ProfileItem) -> str | None:
    if isinstance(item, (ast.Kind, ast.ImportRules, ast.FieldDecl)):  # hf blocks and fields repeat (import_rules.py, fields.py)
        return None
    if isinstance(item, ast.SettingsBlock) and item.block == "facts":
        # facts blocks may repeat, one per set of model_types
        return "facts " + " ".join(sorted({str(t.value) for t in item.types}))
    return _keyword(item)


def _check_statements(profile: ast.Profile, collector: Collector) -> None:
    first: dict[str, ast.ProfileItem] = {}
    for item in profile.items:
        key = _statement_key(item)
        if key is None:
            continue
        if key not in first:
            first[key] = item
            continue
        word = _keyword(item)
        if word == "facts":
            message = (f"profile '{profile.name.value}' has a second facts block for the "
                       "same model_types")
            hint = "merge the two blocks into one"
        else:
            message = f"profile '{profile.name.value}' states `{word}` twice; it may state it once"
            hint = f"merge the two `{word}` statements, or remove one"
        collector.error(_head(item), "duplicate-statement", message, hint=hint,
                        notes=(Note(_head(first[key]), "the first one"),))


# --------------------------------------------------------------------------
# Kinds: default, inheritance, items
# --------------------------------------------------------------------------


def _kind_list(kinds: Iterable[str]) -> str:
    return "[" + ", ".join(f"'{k}'" for k in kinds) + "]"


def _check_default(profile: ast.Profile, kinds: dict[str, ast.Kind],
                   collector: Collector) -> None:
    defaults = _items(profile.items, ast.DefaultKind)
    if not defaults or not kinds or defaults[0].kind.value in kinds:
        return
    name = defaults[0].kind
    collector.error(name.span, "unknown-default-kind",
                    f"profile '{profile.name.value}' names default kind '{name.value}', "
                    f"but its kinds are {_kind_list(kinds)}",
                    hint=did_you_mean(name.value, kinds))


def _check_bases(profile: ast.Profile, kinds: dict[str, ast.Kind],
                 collector: Collector) -> set[str]:
    """Report unknown bases and cycles; return the kinds whose lineage is broken."""
    for kind in kinds.values():
        if kind.base is not None and kind.base.value not in kinds:
            others = [k for k in kinds if k != kind.name.value]
            collector.error(kind.base.span, "unknown-kind",
                            f"kind '{kind.name.value}' inherits from '{kind.base.value}', but "
                            f"profile '{profile.name.value}' has no such kind",
                            hint=did_you_mean(kind.base.value, others))
    _report_cycles(kinds, collector)
    # a lineage that stops at a base is broken; its vector would only repeat that error
    return {name for name, kind in kinds.items() if kind_lineage(kind, kinds)[-1].base is not None}


def _cycle(kind: ast.Kind, kinds: dict[str, ast.Kind]) -> list[str]:
    """Return the cycle the kind's bases run into, in base order, or [] when there is none."""
    path = [kind.name.value]
    current = kind
    while current.base is not None and current.base.value in kinds:
        base = current.base.value
        if base in path:
            return path[path.index(base):]
        path.append(base)
        current = kinds[base]
    return []


def _report_cycles(kinds: dict[str, ast.Kind], collector: Collector) -> None:
    order = list(kinds)
    reported: set[frozenset[str]] = set()
    for kind in kinds.values():
        cycle = _cycle(kind, kinds)
        if not cycle or frozenset(cycle) in reported:
            continue
        reported.add(frozenset(cycle))
        # the last-declared member's `from` is the one that closes the cycle
        closer = max(cycle, key=order.index)
        start = cycle.index(closer)
        chain = cycle[start:] + cycle[:start] + [closer]
        base = kinds[closer].base
        assert base is not None  # every member of a cycle has a base
        collector.error(base.span, "kind-inheritance-cycle",
                        f"kind '{closer}' closes an inheritance cycle: {' from '.join(chain)}",
                        hint="let one kind of the cycle state its complete ops without `from`")


def _check_kind_items(kind: ast.Kind, ops: tuple[str, ...], collector: Collector) -> None:
    first: dict[str, ast.KindItem] = {}
    for item in kind.items:
        word = _keyword(item)
        if word in first:
            collector.error(_head(item), "duplicate-statement",
                            f"kind '{kind.name.value}' states `{word}` twice; it may state it once",
                            hint=f"merge the two `{word}` statements, or remove one",
                            notes=(Note(_head(first[word]), "the first one"),))
        else:
            first[word] = item
        if isinstance(item, ast.OpsBlock):
            _check_ops_block(item, ops, collector)
        elif not isinstance(item, (ast.SlotsBlock, ast.KindDims)):  # check/slots.py, check/kind_dims.py
            _check_flavour(item, collector)


def _check_flavour(item: ast.AttentionFlavour | ast.FfnFlavour | ast.KindWiring, collector: Collector) -> None:
    value = item.value.value
    if isinstance(item, ast.KindWiring):
        if value not in WIRINGS:
            collector.error(item.value.span, "unknown-choice",
                            f"'{value}' is not a wiring; the wirings are {', '.join(repr(w) for w in WIRINGS)}",
                            hint=did_you_mean(value, WIRINGS))
        return
    allowed = ATTENTION_FLAVOURS if isinstance(item, ast.AttentionFlavour) else FFN_FLAVOURS
    if value not in allowed:
        collector.error(item.value.span, "unknown-flavour",
                        f"{_keyword(item)} flavour '{value}' is not one of {_kind_list(allowed)}",
                        hint=did_you_mean(value, allowed))


# --------------------------------------------------------------------------
# Op vectors
# --------------------------------------------------------------------------


def _check_ops_block(block: ast.OpsBlock, ops: tuple[str, ...], collector: Collector) -> None:
    report_duplicates(((c.op.value, c.op) for c in block.counts), collector,
                      "duplicate-op-count", "op count")
    for count in block.counts:
        name = count.op.value
        # without a vocabulary (reported once, above) every op name would be unknown
        if ops and name not in ops:
            collector.error(count.op.span, "unknown-op",
                            f"op '{name}' is not in the op vocabulary", hint=did_you_mean(name, ops))
        literal = count.count
        if literal.kind != "int" or not isinstance(literal.value, int) or literal.value < 0:
            _check_count(count, collector)  # only a count with a problem pays for the call


def _check_count(count: ast.OpCount, collector: Collector) -> None:
    literal = count.count
    if literal.kind != "int":
        collector.error(literal.span, "count-not-integer",
                        f"the count of '{count.op.value}' must be a whole number, "
                        f"found {_show(literal)}",
                        hint="write a non-negative integer, e.g. 0, 1 or 2")
    elif isinstance(literal.value, int) and literal.value < 0:
        collector.error(literal.span, "negative-count",
                        f"the count of '{count.op.value}' is {literal.value}; "
                        "an op runs a non-negative number of times",
                        hint="declare 0 for an op the layer does not run")


def _check_vector(profile: ast.Profile, kind: ast.Kind, kinds: dict[str, ast.Kind],
                  ops: tuple[str, ...], collector: Collector) -> None:
    vector = kind_vector(kind, kinds)
    missing = [op for op in ops if op not in vector]
    if missing:
        inherited = f" (with what it inherits from '{kind.base.value}')" if kind.base else ""
        collector.error(kind.name.span, "missing-op-count",
                        f"kind '{kind.name.value}' of profile '{profile.name.value}'{inherited} "
                        f"is missing counts for {', '.join(missing)}",
                        hint="declare 0 for an op the layer does not run")
    attention, _ = kind_flavours(kind, kinds)
    _check_linear_agreement(kind, vector.get(LINEAR_OP), attention, collector)


def _check_linear_agreement(kind: ast.Kind, linrec: ast.OpCount | None, attention: str,
                            collector: Collector) -> None:
    if linrec is None or linrec.count.kind != "int" or attention not in ATTENTION_FLAVOURS:
        return
    runs = int(linrec.count.value) > 0
    if runs == (attention == "linear"):
        return
    if runs:
        hint = f"state `attention linear`, or count {LINEAR_OP} 0"
    else:
        hint = f"count {LINEAR_OP} 1 (one state update per layer), or state `attention full`"
    collector.warning(kind.name.span, "flavour-mismatch",
                      f"kind '{kind.name.value}' counts {LINEAR_OP} {linrec.count.value}, "
                      f"but its attention is {attention}",
                      hint=hint, notes=(Note(linrec.span, f"{LINEAR_OP} is counted here"),))


# --------------------------------------------------------------------------
# run, model and facts blocks
# --------------------------------------------------------------------------


def _show(literal: ast.Literal) -> str:
    if literal.kind == "bool":
        return "true" if literal.value else "false"
    if literal.kind == "string":
        return f'the string "{literal.value}"'
    return f"the {'integer' if literal.kind == 'int' else 'number'} {literal.value}"


def _expected(literal: ast.Literal, spec: FieldSpec) -> str | None:
    """Return what `spec` expects when `literal` does not fit it, else None."""
    if spec.type == "int":
        least = spec.minimum
        fits = literal.kind == "int" and (least is None or int(literal.value) >= least)
        return None if fits else ("an integer" + (f" >= {least}" if least is not None else ""))
    if spec.type == "float":
        return None if literal.kind in ("int", "float") else "a number"
    if spec.type == "choice":
        choices = getattr(spec, "choices", ())
        fits = literal.kind == "string" and literal.value in choices
        return None if fits else "one of " + ", ".join(f'"{c}"' for c in choices)
    wanted = {"bool": "true or false", "string": "a string"}[spec.type]
    return None if literal.kind == spec.type else wanted


def _check_setting(setting: ast.Setting, table: _Table, collector: Collector) -> None:
    key = setting.key.value
    spec = table.fields.get(key)
    if spec is None:
        collector.error(setting.key.span, table.unknown, f"'{key}' is not a {table.what}",
                        hint=did_you_mean(key, table.fields))
        return
    expected = _expected(setting.value, spec)
    if expected is not None:
        collector.error(setting.value.span, table.wrong_type,
                        f"{table.what} '{key}' must be {expected}, found {_show(setting.value)}",
                        hint=f"{key}: {spec.meaning}")


def _listed_types(profile: ast.Profile) -> list[ast.Literal]:
    return [t for item in _items(profile.items, ast.ModelTypes) for t in item.types]


def _check_settings_blocks(profile: ast.Profile, collector: Collector) -> None:
    listed = {str(t.value) for t in _listed_types(profile)}
    stated: dict[tuple[str, str], ast.Name] = {}
    for block in _items(profile.items, ast.SettingsBlock):
        table = _TABLES[block.block]
        report_duplicates(((s.key.value, s.key) for s in block.settings), collector,
                          "duplicate-setting", table.what)
        for setting in block.settings:
            _check_setting(setting, table, collector)
        if block.block == "facts":
            _check_fact_types(profile, block, listed, collector)
            _check_fact_overlap(block, listed, stated, collector)


def _check_fact_types(profile: ast.Profile, block: ast.SettingsBlock, listed: set[str],
                      collector: Collector) -> None:
    for literal in block.types:
        if literal.value in listed:
            continue
        hint = (did_you_mean(str(literal.value), listed) if listed
                else f'list it in the profile: model_types "{literal.value}"')
        lists = f"lists {_kind_list(sorted(listed))} in" if listed else "lists no"
        collector.error(literal.span, "unknown-model-type",
                        f"facts block names model_type \"{literal.value}\", but profile "
                        f"'{profile.name.value}' {lists} model_types", hint=hint)


def _check_fact_overlap(block: ast.SettingsBlock, listed: set[str],
                        stated: dict[tuple[str, str], ast.Name], collector: Collector) -> None:
    """Report a fact stated twice for one model_type across facts blocks."""
    # a block without model_types holds for every model_type the profile lists
    types = sorted({str(t.value) for t in block.types} or listed or {"*"})
    for key in dict.fromkeys(s.key.value for s in block.settings):
        node = next(s.key for s in block.settings if s.key.value == key)
        clash = next((t for t in types if (t, key) in stated), None)
        if clash is not None:
            shown = "every model_type" if clash == "*" else f"model_type \"{clash}\""
            collector.error(node.span, "duplicate-setting",
                            f"fact '{key}' is stated twice for {shown}",
                            hint="state each fact once per model_type: remove one, or narrow "
                                 "the model_types of a block",
                            notes=(Note(stated[(clash, key)].span, "first stated here"),))
        for model_type in types:
            stated.setdefault((model_type, key), node)


def _check_model_type_claims(profiles: list[ast.Profile], collector: Collector) -> None:
    claimed: dict[str, tuple[str, ast.Literal]] = {}
    for profile in profiles:
        for literal in _listed_types(profile):
            model_type = str(literal.value)  # model_types are string literals
            first = claimed.get(model_type)
            if first is None:
                claimed[model_type] = (profile.name.value, literal)
                continue
            owner = ("this profile" if first[0] == profile.name.value
                     else f"profile '{first[0]}'")
            collector.error(literal.span, "duplicate-model-type",
                            f"model_type \"{literal.value}\" is already claimed by {owner}",
                            hint="an importer picks the profile by model_type, so each may be "
                                 "claimed once; remove one claim",
                            notes=(Note(first[1].span, "first claimed here"),))
