"""Field declarations into diagnostics: where they stand, duplicates, redeclarations, bounds and defaults.

A `field` declaration (grammar/hpdsl.lark, "Model fields") stands at the top
level of the standard library (fields/model.hpf, which must equal the table
hpdsl/model/fields.py reads) or inside a profile or a family (an author's).
An author may not give a standard field, a bound value or an axis another
meaning, nor declare one name two ways. Every problem is reported; none raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import attrs

from hpdsl import ast
from hpdsl.bound.config import BOUND
from hpdsl.diagnostics import Collector, Note, did_you_mean
from hpdsl.ir.lower_fields import TOP_LEVEL, declarations, field_type, lower_field
from hpdsl.model.fields import BLOCKS, FIELDS, MAX_DIMENSION, Field
from hpdsl.model.layouts import LAYOUT_AXES
from hpdsl.resources import STDLIB_PREFIX, data_dir
from hpdsl.scope import Scope

_AXES = ("tp", "cp", "ep", "pp", "etp", *LAYOUT_AXES)
_MODEL_WORDS = ("name", "profile", "stack", "layer_types", "groups", "source", "extra", *BLOCKS)
_BOUND_OPS = (">=", "<=")


def check_fields(scope: Scope, collector: Collector) -> None:
    """Report every problem with the field declarations in scope."""
    first: dict[str, _First] = {}
    for decl, owner in _declarations(scope):
        if not _sound(decl, collector):
            continue
        field = lower_field(decl)
        if owner is None:
            _check_standard(decl, field, collector)
        elif _check_author(decl, field, collector):
            _check_agreement(_First(decl, field, owner), first, collector)


@attrs.frozen
class _First:
    """An author declaration and the profile or family holding it."""

    decl: ast.FieldDecl
    field: Field
    owner: ast.Profile | ast.Family = attrs.field(eq=False)


def _declarations(scope: Scope) -> Iterator[tuple[ast.FieldDecl, ast.Profile | ast.Family | None]]:
    """Yield each declaration with the profile or family holding it (None: a file's top level)."""
    for file in scope.files:
        for item in file.items:
            if isinstance(item, ast.FieldDecl):
                yield item, None
            elif isinstance(item, (ast.Profile, ast.Family)):
                yield from ((decl, item) for decl in declarations(item.items))


# --------------------------------------------------------------------------
# One declaration on its own: block, bounds, default
# --------------------------------------------------------------------------


def _sound(decl: ast.FieldDecl, collector: Collector) -> bool:
    """Report a block, bound or default that does not hold; return whether the declaration is sound."""
    count = len(collector.diagnostics)
    if decl.block is not None and decl.block.value not in (TOP_LEVEL, *BLOCKS):
        collector.error(decl.block.span, "unknown-field-block",
                        f"field '{decl.name.value}' is declared in block '{decl.block.value}', which models "
                        f"do not have", hint=did_you_mean(decl.block.value, (TOP_LEVEL, *BLOCKS)))
    _check_bounds(decl, collector)
    _check_default(decl, collector)
    return len(collector.diagnostics) == count


def _check_bounds(decl: ast.FieldDecl, collector: Collector) -> None:
    name, kind = decl.name.value, field_type(decl)
    if decl.bounds and kind != "int":
        collector.error(decl.bounds[0].span, "bad-field-declaration",
                        f"field '{name}' is {kind}, but states a bound; only an int has bounds",
                        hint="drop the bound, or declare the field `int`")
        return
    seen: dict[str, ast.FieldBound] = {}
    for bound in decl.bounds:
        if bound.op not in _BOUND_OPS:
            collector.error(bound.span, "bad-field-declaration",
                            f"field '{name}' states the bound `{bound.op} {bound.value.value}`; a bound is "
                            "`>= N` (the least value) or `<= N` (the greatest)", hint="write `>= N` or `<= N`")
        elif bound.op in seen:
            collector.error(bound.span, "bad-field-declaration",
                            f"field '{name}' states `{bound.op}` twice", hint="keep one of them",
                            notes=(Note(seen[bound.op].span, "first stated here"),))
        else:
            seen[bound.op] = bound
    low, high = seen.get(">="), seen.get("<=")
    if high is not None and int(high.value.value) > MAX_DIMENSION:
        collector.error(high.value.span, "bad-field-declaration",
                        f"field '{name}' may reach {int(high.value.value):,}, past {MAX_DIMENSION:,} (2^31), "
                        "the most a field may hold (products of two must stay below 2^63)",
                        hint=f"bound it `<= {MAX_DIMENSION}` or less")
    elif low is not None and high is not None and int(low.value.value) > int(high.value.value):
        collector.error(low.span, "bad-field-declaration",
                        f"field '{name}' must be at least {low.value.value} and at most {high.value.value}: "
                        "no value is both", hint="swap the bounds, or fix one of them")


def _check_default(decl: ast.FieldDecl, collector: Collector) -> None:
    default, kind, name = decl.default, field_type(decl), decl.name.value
    if default is None:
        return
    if isinstance(decl.type, ast.EnumType):
        values = [v.value for v in decl.type.values]
        if not isinstance(default, ast.Name) or default.value not in values:
            found = default.value if isinstance(default, ast.Name) else repr(default.value)
            collector.error(default.span, "bad-field-declaration",
                            f"field '{name}' defaults to {found}, which is not one of its values",
                            hint=did_you_mean(str(found), values))
        return
    literal_kind = "name" if isinstance(default, ast.Name) else default.kind
    if not (literal_kind == kind or (kind == "float" and literal_kind == "int")):
        collector.error(default.span, "bad-field-declaration",
                        f"field '{name}' is {kind}, but its default is a {literal_kind}",
                        hint=f"give it a {kind} default, or none")
        return
    if kind == "int" and isinstance(default, ast.Literal) and isinstance(default.value, int):
        low, high = lower_field(decl).minimum, lower_field(decl).maximum
        if (low is not None and default.value < low) or (high is not None and default.value > high):
            collector.error(default.span, "bad-field-declaration",
                            f"field '{name}' defaults to {default.value}, outside its bounds {low}..{high}",
                            hint="give it a default within its bounds")


# --------------------------------------------------------------------------
# Against the standard fields and each other
# --------------------------------------------------------------------------


def _check_standard(decl: ast.FieldDecl, field: Field, collector: Collector) -> None:
    """Report a top-level declaration outside the standard library, and one the table does not hold."""
    if not _standard_file(decl.span.file):
        collector.error(decl.span, "field-outside-profile",
                        f"field '{decl.name.value}' is declared at the top level, where only the standard "
                        "library declares fields", hint="declare it inside the profile or family whose "
                        f"models state it: `profile NAME {{ field {decl.name.value}: ... }}`")
    elif FIELDS.get(field.name) != field:
        collector.error(decl.name.span, "field-redeclared",
                        f"standard field '{field.name}' is not declared this way in the table hpdsl reads "
                        "(fields/model.fields.json)", hint="rewrite the table: `python -m hpdsl.ir.lower_fields`")


@lru_cache(maxsize=64)
def _standard_file(name: str) -> bool:
    """Whether a file is the standard library's: by its display name, or by path (the language server's)."""
    if name.startswith(STDLIB_PREFIX):
        return True
    try:
        return Path(name).resolve() in {path.resolve() for path in data_dir("fields").glob("*.hpf")}
    except (OSError, ValueError):
        return False


def _check_author(decl: ast.FieldDecl, field: Field, collector: Collector) -> bool:
    """Report an author field that redeclares a standard field, a bound value or an axis; or is an enum."""
    name = field.name
    standard = FIELDS.get(name)
    if standard is not None and _shape(standard) != _shape(field):
        collector.error(decl.name.span, "field-redeclared",
                        f"'{name}' is a standard field ({describe_field(standard)}), but this declares it "
                        f"{describe_field(field)}", hint=f"drop the declaration to use the standard '{name}', "
                                                          "or give this field another name")
        return False
    if name in BOUND or name in _AXES or name in _MODEL_WORDS:
        what = ("a value binding sets" if name in BOUND else "a mesh axis" if name in _AXES
                else "a word of the model statement")
        collector.error(decl.name.span, "field-redeclared",
                        f"'{name}' is {what}, so it cannot name a model field", hint="give the field another name")
        return False
    if field.type == "choice":
        collector.error(decl.type.span, "bad-field-declaration",
                        f"field '{name}' is an enum: a model states only the standard choices (norm, mlp, "
                        "activation) by name", hint=f'declare it `string` and state it in quotes: `{name} "value"`')
        return False
    return True


def _check_agreement(this: _First, first: dict[str, _First], collector: Collector) -> None:
    """Report a second declaration of one name in one owner, or one that disagrees with the first."""
    name = this.field.name
    seen = first.setdefault(name, this)
    if seen is this:
        return
    same_owner = seen.owner is this.owner
    if same_owner or _shape(seen.field) != _shape(this.field):
        what = "profile" if isinstance(this.owner, ast.Profile) else "family"
        message = (f"{what} '{this.owner.name.value}' declares field '{name}' twice" if same_owner else
                   f"field '{name}' is declared {describe_field(this.field)} here, but "
                   f"{describe_field(seen.field)} before")
        collector.error(this.decl.name.span, "duplicate-field-declaration", message,
                        hint="keep one declaration of the field (profiles and families may share a name "
                             "only declared alike)", notes=(Note(seen.decl.name.span, "first declared here"),))


def _shape(field: Field) -> tuple[object, ...]:
    """What a redeclaration must keep: type, block, bounds, default, whether required, choices."""
    return (field.type, field.block, field.minimum, field.maximum, field.default, field.required, field.choices)


def describe_field(field: Field) -> str:
    """Return a field's shape in words: `int >= 1 <= 2147483648 in moe, required`."""
    text = field.type if field.type != "choice" else f"enum({', '.join(field.choices)})"
    if field.type == "int":
        text += f" >= {field.minimum} <= {field.maximum}"
    text += f" in {field.block}" if field.block else ""
    if field.required:
        return text + ", required"
    return text + (f", default {field.default}" if field.default not in (None, False) else "")


__all__ = ["check_fields", "describe_field"]
