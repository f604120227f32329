"""A model's fields, blocks and choices into diagnostics: names, types, bounds, duplicates and what is required.

Fields are checked against the field table (hpdsl/model/fields.py) and the author
fields the model's profile and the families declare (hpdsl/check/fields.py
checks those declarations). Every check reports and carries on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hpdsl import ast
from hpdsl.diagnostics import Collector, Note, did_you_mean
from hpdsl.model.fields import BLOCKS, FIELDS, KEYWORD_CHOICES, Field, block_fields, required, top_level

# The names a model body may start a statement with, for did-you-mean hints.
TOP_FIELDS = {n: f for n, f in top_level().items() if n not in KEYWORD_CHOICES}
_STATEMENTS = (*top_level(), *BLOCKS, "stack", "layer_types")

_ARTICLES = {"int": "an int", "float": "a number", "bool": "a bool", "string": "a string",
             "choice": "one of its choices, quoted"}


def items_of(items: Iterable[object], kind: type | tuple[type, ...]) -> list[Any]:
    """Return the items that are instances of `kind`, in order."""
    return [item for item in items if isinstance(item, kind)]


def quoted(names: Iterable[str]) -> str:
    """Return the names quoted and comma-separated, for a message."""
    return ", ".join(f"'{name}'" for name in names)


def duplicate(name: ast.Name, first: ast.Name, collector: Collector) -> None:
    """Report a name stated a second time, pointing at the first."""
    collector.error(name.span, "duplicate-field", f"'{name.value}' is stated twice",
                    hint="keep one of them", notes=(Note(first.span, "first stated here"),))


def check_model_fields(fields: Iterable[ast.Field], table: dict[str, Field], where: str,
                       collector: Collector) -> dict[str, ast.Field]:
    """Report unknown, duplicate, mistyped and too-small fields; return the sound ones by name."""
    sound: dict[str, ast.Field] = {}
    seen: dict[str, ast.Field] = {}
    for field in fields:
        name = field.name.value
        if name not in table:
            _unknown_field(field.name, table, where, collector)
        elif name in seen:
            duplicate(field.name, seen[name].name, collector)
        else:
            seen[name] = field
            if _field_sound(field, table[name], collector):
                sound[name] = field
    return sound


def _unknown_field(name: ast.Name, table: dict[str, Field], where: str,
                   collector: Collector) -> None:
    value = name.value
    if where == "model" and value in BLOCKS:
        hint = f"'{value}' is a block: write `{value} {{ ... }}`"
    else:
        hint = did_you_mean(value, (*_STATEMENTS, *table) if where == "model" else table)
    collector.error(name.span, "unknown-field",
                    f"{_where(where)} has no field '{value}'", hint=hint)


def _where(where: str) -> str:
    return "a model" if where == "model" else f"a {where} block"


def _field_sound(field: ast.Field, field_spec: Field, collector: Collector) -> bool:
    """Report a field whose value has the wrong type or is below its minimum."""
    name, value = field.name.value, field.value
    wanted = _ARTICLES[field_spec.type]
    if value is None:
        if field_spec.type == "bool":
            return True
        collector.error(field.name.span, "field-type",
                        f"'{name}' is stated alone, which only a bool flag may be; it takes {wanted}",
                        hint=f"give it a value: `{name} N` ({field_spec.meaning})")
        return False
    kind = "string" if field_spec.type == "choice" else field_spec.type
    if not (value.kind == kind or (kind == "float" and value.kind == "int")):
        collector.error(value.span, "field-type",
                        f"'{name}' takes {wanted}, found {_describe(value)}",
                        hint=_type_hint(name, field_spec))
        return False
    if field_spec.type == "choice" and value.value not in field_spec.choices:
        collector.error(value.span, "unknown-choice",
                        f"'{value.value}' is not a {name}; the {name} choices are {quoted(field_spec.choices)}",
                        hint=did_you_mean(str(value.value), field_spec.choices) or f"'{name}' is the {field_spec.meaning}")
        return False
    return _within_bounds(name, value, field_spec, collector)


def _within_bounds(name: str, value: ast.Literal, field_spec: Field, collector: Collector) -> bool:
    """Report a number below the field's minimum or above its maximum."""
    number = value.value
    if field_spec.minimum is not None and isinstance(number, (int, float)) and number < field_spec.minimum:
        collector.error(value.span, "non-positive-field",
                        f"'{name}' must be at least {field_spec.minimum}, found {value.value}",
                        hint=f"'{name}' means: {field_spec.meaning}")
        return False
    if field_spec.maximum is not None and isinstance(number, int) and number > field_spec.maximum:
        collector.error(value.span, "field-too-large",
                        f"'{name}' may be at most {field_spec.maximum:,}, found {number:,}",
                        hint=f"'{name}' means: {field_spec.meaning}; check the digits")
        return False
    return True


def _describe(value: ast.Literal) -> str:
    """Return a literal as found: its kind and its text."""
    if value.kind == "bool":
        return f"the bool `{str(value.value).lower()}`"
    if value.kind == "string":
        return f'the string "{value.value}"'
    return f"the {value.kind} `{value.value}`"


def _type_hint(name: str, field_spec: Field) -> str:
    if field_spec.type == "bool":
        return f"write `{name}` alone for true, or `{name} false`"
    if field_spec.type == "choice":
        return f'write `{name} "{field_spec.choices[0]}"`, one of {quoted(field_spec.choices)}'

    return f"'{name}' is the {field_spec.meaning}"


def check_blocks(model: ast.Model, author: dict[str, Field],
                 collector: Collector) -> dict[str, dict[str, ast.Field]]:
    """Check each block's name and fields (the standard ones and the author's); return the sound ones."""
    blocks: dict[str, dict[str, ast.Field]] = {}
    for block in items_of(model.items, ast.Block):
        name = block.name.value
        if name not in BLOCKS:
            hint = (f"'{name}' is a field: write `{name} VALUE`" if name in TOP_FIELDS
                    else did_you_mean(name, BLOCKS))
            collector.error(block.name.span, "unknown-field", f"a model has no block '{name}'",
                            hint=hint)
            continue
        declared = {**block_fields(name), **{n: f for n, f in author.items() if f.block == name}}
        fields = check_model_fields(block.fields, declared, name, collector)
        blocks.setdefault(name, fields)
        _check_block_complete(block, author, collector)
    return blocks


def _check_block_complete(block: ast.Block, author: dict[str, Field], collector: Collector) -> None:
    name = block.name.value
    stated = {field.name.value for field in block.fields}
    needed = (*required(name), *(n for n, f in author.items() if f.block == name and f.required))
    missing = [field for field in needed if field not in stated]
    if missing:
        collector.error(block.name.span, "incomplete-block",
                        f"the {name} block lacks {quoted(missing)}",
                        hint=f"a {name} block states {quoted(needed)}")


def check_duplicate_blocks(model: ast.Model, collector: Collector) -> None:
    """Report a second block of one name."""
    seen: dict[str, ast.Name] = {}
    for block in items_of(model.items, ast.Block):
        if block.name.value in seen:
            duplicate(block.name, seen[block.name.value], collector)
        else:
            seen.setdefault(block.name.value, block.name)


def check_choices(model: ast.Model, collector: Collector) -> None:
    """Report a choice stated twice or naming a value its key does not offer."""
    seen: dict[str, ast.Name] = {}
    for choice in items_of(model.items, ast.Choice):
        key, value = choice.key.value, choice.value.value
        if key in seen:
            duplicate(choice.key, seen[key], collector)
            continue
        seen[key] = choice.key
        allowed = FIELDS[key].choices
        if value not in allowed:
            collector.error(choice.value.span, "unknown-choice",
                            f"'{value}' is not a {key}; the {key} choices are {quoted(allowed)}",
                            hint=did_you_mean(value, allowed))


def check_required(model: ast.Model, author: dict[str, Field], collector: Collector) -> None:
    """Report the required top-level fields (the standard ones and the author's) the model lacks."""
    stated = {field.name.value for field in items_of(model.items, ast.Field)}
    needed = (*required(None), *(n for n, f in author.items() if f.block is None and f.required))
    missing = [name for name in needed if name not in stated]
    if missing:
        collector.error(model.name.span, "missing-field",
                        f"model '{model.name.value}' lacks {quoted(missing)}",
                        hint="every model states " + quoted(needed))
