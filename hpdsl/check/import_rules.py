"""A profile's import rules (`hf ["model_type" ...] { ... }`) into diagnostics.

An hf block names model_types the profile lists (or "*", every config); a map
targets a model field or a block's field (hpdsl/model/fields.py), or a top-level
field the profile declares itself (`field NAME: ...`); a read names
a key a built-in rule of the importer reads (hpdsl/importers/rules.py
BUILTIN_READS); a pattern's symbols are single characters (a string's) or
names (a list's); no key gets two
rules of one sort for one model_type. docs/importing.md describes the rules.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping

from hpdsl import ast
from hpdsl.bound.config import DIM_NAMES
from hpdsl.diagnostics import Collector, Note, did_you_mean
from hpdsl.fmt.inline import format_literal
from hpdsl.importers.rules import BUILTIN_READS, EVERY_CONFIG
from hpdsl.ir.lower_fields import lower_fields
from hpdsl.model.fields import FIELDS, Field, block_fields


def check_import_rules(profile: ast.Profile, listed: set[str], collector: Collector) -> None:
    """Report every problem with the hf blocks of one profile (`listed`: its model_types).

    A map or derive may write the author fields the profile declares (top-level ones) besides FIELDS.
    """
    declared = {f.name: f for f in lower_fields(profile.items) if f.name not in FIELDS and f.block is None}
    seen: dict[tuple[str, str, str], ast.Name] = {}
    for block in (item for item in profile.items if isinstance(item, ast.ImportRules)):
        _check_types(profile, block, listed, collector)
        types = sorted({str(t.value) for t in block.types} or listed or {EVERY_CONFIG})
        for sort, name in _keys(block):
            clash = next((t for t in types if (t, sort, name.value) in seen), None)
            if clash is not None:
                collector.error(name.span, "duplicate-import-rule",
                                f"config key '{name.value}' has two `{sort}` rules for model_type \"{clash}\"",
                                hint="state one rule per key and model_type: remove one, or narrow the "
                                     "model_types of a block",
                                notes=(Note(seen[(clash, sort, name.value)].span, "first stated here"),))
            for model_type in types:
                seen.setdefault((model_type, sort, name.value), name)
        for rule in block.rules:
            _check_rule(rule, declared, collector)


def _keys(block: ast.ImportRules) -> Iterator[tuple[str, ast.Name]]:
    """Yield (rule sort, key) for every key a block's rules name."""
    for rule in block.rules:
        if isinstance(rule, ast.HfDefault):
            yield "default", rule.key
        elif isinstance(rule, ast.HfMap):
            yield "map", rule.key
        elif isinstance(rule, ast.HfRead):
            yield from (("read", key) for key in rule.keys)
        elif isinstance(rule, ast.HfIgnore):
            yield from (("ignore", entry.key) for entry in rule.keys if isinstance(entry.key, ast.Name))
        elif isinstance(rule, ast.HfPattern):
            yield "pattern", rule.key
        elif isinstance(rule, ast.HfWeight):
            continue  # names of tensors, not config keys (checked in _check_weight)
        else:
            yield "derive", rule.field


def _check_types(profile: ast.Profile, block: ast.ImportRules, listed: set[str], collector: Collector) -> None:
    for literal in block.types:
        if literal.value in listed or literal.value == EVERY_CONFIG:
            continue
        hint = (did_you_mean(str(literal.value), listed) if listed
                else f'list it in the profile: model_types "{literal.value}"')
        collector.error(literal.span, "unknown-model-type",
                        f"hf block names model_type \"{literal.value}\", but profile '{profile.name.value}' "
                        f"does not list it in its model_types", hint=hint or f'or write hf "{EVERY_CONFIG}"')


def _check_rule(rule: ast.HfRule, declared: Mapping[str, Field], collector: Collector) -> None:
    if isinstance(rule, ast.HfMap):
        _check_map(rule, declared, collector)
    elif isinstance(rule, ast.HfDerive):
        _check_derive(rule, declared, collector)
    elif isinstance(rule, ast.HfRead):
        for key in rule.keys:
            if key.value not in BUILTIN_READS:
                collector.error(key.span, "unknown-import-key",
                                f"no built-in import rule reads config key '{key.value}'",
                                hint=_close(key.value, BUILTIN_READS)
                                or "map it to a field (`map KEY -> FIELD`) or ignore it (`ignore \"why\" { KEY }`)")
    elif isinstance(rule, ast.HfWeight):
        _check_weight(rule, declared, collector)
    elif isinstance(rule, ast.HfPattern):
        # A string's characters name its layers ("M"), a list's entries ("mamba"): one sort per pattern.
        single = bool(rule.symbols) and len(str(rule.symbols[0].symbol.value)) == 1
        for symbol in rule.symbols:
            if (len(str(symbol.symbol.value)) == 1) != single or not str(symbol.symbol.value):
                collector.error(symbol.symbol.span, "bad-pattern-symbol",
                                f"pattern symbol {symbol.symbol.value!r} is not one character"
                                if single else f"pattern symbol {symbol.symbol.value!r} is not a layer type's name",
                                hint="each character of a pattern string names one layer "
                                     '(e.g. "M" -> linear_attention), each entry of a list one layer '
                                     '(e.g. "mamba" -> linear_attention); one sort per pattern')


def _check_weight(rule: ast.HfWeight, declared: Mapping[str, Field], collector: Collector) -> None:
    if rule.join and rule.split is not None:
        collector.error(rule.span, "bad-weight-name", "a weight rule both joins and splits tensors",
                        hint="join transformers' tensors into one built tensor, or split one into several: "
                             "state two rules")
    for literal in rule.targets:
        target = str(literal.value)
        for source in (str(s.value) for s in rule.sources):
            if not source or not target or source.endswith(".") != target.endswith("."):
                collector.error(literal.span, "bad-weight-name",
                                f"weight maps {source!r} to {target!r}: both must be whole names or both prefixes",
                                hint='a prefix ends with "." on both sides: weight "model.norm." -> "norm."')
            elif placeholders(source) != placeholders(target):
                collector.error(literal.span, "bad-weight-name",
                                f"weight {source!r} has placeholders {sorted(placeholders(source))}, "
                                f"{target!r} has {sorted(placeholders(target))}",
                                hint='name the same placeholders on both sides, e.g. "{i}" for the layer index')
    if rule.split is not None:
        _check_split(rule.split, declared, collector)


def _check_split(split: ast.HfSplit, declared: Mapping[str, Field], collector: Collector) -> None:
    """A split states one size per part; its sizes and groups read the counts a layer config holds."""
    if len(split.sizes) != len(split.targets):
        collector.error(split.span, "bad-weight-split",
                        f"split names {len(split.targets)} parts but states {len(split.sizes)} sizes",
                        hint="state one size (its rows) per part, in the parts' order: "
                             "split(\"q.\", \"k.\") by (heads * head_dim, kv_heads * head_dim)")
    counts = set(DIM_NAMES) | {name for name, field in declared.items() if field.type in ("int", "bool")}
    for dim in (*split.sizes, *(() if split.groups is None else (split.groups,))):
        for name in ast.dim_names(dim):
            if name.value not in counts:
                collector.error(name.span, "bad-weight-split",
                                f"split size reads '{name.value}', which is not a model field holding a count",
                                hint=_close(name.value, counts) or "docs/language.md lists the model fields")


def placeholders(pattern: str) -> set[str]:
    """Return the `{name}` placeholders of a weight-name pattern."""
    return set(re.findall(r"\{(\w+)\}", pattern))


def _check_map(rule: ast.HfMap, declared: Mapping[str, Field], collector: Collector) -> None:
    if rule.block is None:
        table = {**{name: field for name, field in FIELDS.items() if field.block is None}, **declared}
        where = "a model field"
    else:
        table = block_fields(rule.block.value)
        where = f"a field of block '{rule.block.value}'"
        if not table:
            blocks = sorted({f.block for f in FIELDS.values() if f.block})
            collector.error(rule.block.span, "unknown-import-field",
                            f"'{rule.block.value}' is not a model block",
                            hint=_close(rule.block.value, blocks) or f"the blocks are {', '.join(blocks)}")
            return
    fields = set(table)
    if rule.field.value not in fields:
        collector.error(rule.field.span, "unknown-import-field",
                        f"map names '{rule.field.value}', which is not {where}",
                        hint=_close(rule.field.value, fields) or "docs/language.md lists the model fields")
        return
    _check_values(rule, table[rule.field.value], collector)


def _check_values(rule: ast.HfMap, field: Field, collector: Collector) -> None:
    """A map's table states each config value once, and translates it into a value the field takes."""
    seen: list[ast.Literal] = []
    for entry in rule.values:
        first = next((s for s in seen if s.kind == entry.stated.kind and s.value == entry.stated.value), None)
        if first is not None:
            collector.error(entry.stated.span, "bad-import-value",
                            f"map {rule.key.value} translates {format_literal(entry.stated)} twice",
                            hint="state each config value once in the table",
                            notes=(Note(first.span, "first stated here"),))
        seen.append(entry.stated)
        problem = _value_problem(entry.value, field)
        if problem:
            shown = entry.value.value if isinstance(entry.value, ast.Name) else format_literal(entry.value)
            collector.error(entry.value.span, "bad-import-value",
                            f"map {rule.key.value} translates {format_literal(entry.stated)} into {shown}, "
                            f"but {field.name} {problem}",
                            hint=_close(str(entry.value.value), field.choices)
                            or f"write a value {field.name} takes (docs/language.md lists the model fields)")


def _value_problem(value: ast.Literal | ast.Name, field: Field) -> str:
    """Return what is wrong with `value` as the field's value ('' when it is one)."""
    if field.type == "choice":
        text = value.value if isinstance(value, ast.Name) or value.kind == "string" else None
        return "" if text in field.choices else f"is one of {', '.join(field.choices)}"
    wanted = {"bool": ("bool",), "int": ("int",), "float": ("int", "float"), "string": ("string",)}
    kinds = wanted.get(field.type, ())
    if isinstance(value, ast.Name) or value.kind not in kinds:
        return f"holds {'an' if field.type == 'int' else 'a'} {field.type}"
    return ""


def _check_derive(rule: ast.HfDerive, declared: Mapping[str, Field], collector: Collector) -> None:
    """A derived field is a top-level int or float field (standard or the profile's), computed from int fields."""
    top = {name: field for name, field in {**FIELDS, **declared}.items() if field.block is None}
    ints = {name for name, field in top.items() if field.type == "int"}
    if rule.field.value not in ints | {name for name, field in top.items() if field.type == "float"}:
        collector.error(rule.field.span, "unknown-import-field",
                        f"derive names '{rule.field.value}', which is not a model field holding a number",
                        hint=_close(rule.field.value, ints) or "docs/language.md lists the model fields")
    for name in ast.dim_names(rule.value):
        if name.value not in ints:
            collector.error(name.span, "unknown-import-field",
                            f"derive reads '{name.value}', which is not a model field holding a number",
                            hint=_close(name.value, ints) or "docs/language.md lists the model fields")


def _close(name: str, candidates: Iterable[str]) -> str:
    """Return a did-you-mean hint when a candidate is close, else ''."""
    return did_you_mean(name, candidates) if difflib.get_close_matches(name, list(candidates), n=1) else ""
