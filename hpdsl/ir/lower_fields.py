"""Field declarations into Field records, and the standard ones into the table hpdsl reads at import.

`field NAME: TYPE ...` (grammar/hpdsl.lark, "Model fields") lowers to one
hpdsl.model.fields.Field. The standard declarations (fields/model.hpf) are
written once more as fields/model.fields.json, which hpdsl/model/fields.py
reads, so `import hpdsl` parses nothing; `python -m hpdsl.ir.lower_fields`
rewrites it and tests/model/test_fields.py holds the two equal. Only called on
declarations that checked clean (hpdsl/check/fields.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

import attrs

from hpdsl import ast
from hpdsl.files import write_text_atomic
from hpdsl.model.fields import FIELDS, MAX_DIMENSION, Field, FieldType, Scalar, table_path
from hpdsl.scope import Scope

TOP_LEVEL = "model"
"""The block name `in model` gives a field written at the model's top level."""


def lower_field(decl: ast.FieldDecl) -> Field:
    """Return the Field a clean declaration declares."""
    type_ = field_type(decl)
    block = None if decl.block is None or decl.block.value == TOP_LEVEL else decl.block.value
    minimum, maximum = field_bounds(decl)
    choices = tuple(v.value for v in decl.type.values) if isinstance(decl.type, ast.EnumType) else ()
    return Field(decl.name.value, type_, str(decl.meaning.value), block, minimum, field_default(decl, type_),
                 decl.required, tuple(key.value for key in decl.hf), choices, maximum)


def field_type(decl: ast.FieldDecl) -> FieldType:
    """Return the Field type of a declaration: int, float, bool, string or choice (an enum)."""
    if isinstance(decl.type, ast.ScalarType):
        return decl.type.kind
    return "bool" if isinstance(decl.type, ast.BoolType) else "choice"


def field_bounds(decl: ast.FieldDecl) -> tuple[int | None, int | None]:
    """Return an int field's (minimum, maximum): the stated bounds, else 1 and 2^31; (None, None) otherwise."""
    if field_type(decl) != "int":
        return None, None
    minimum, maximum = 1, MAX_DIMENSION
    for bound in decl.bounds:
        value = int(bound.value.value)
        if bound.op == ">=":
            minimum = value
        elif bound.op == "<=":
            maximum = value
    return minimum, maximum


def field_default(decl: ast.FieldDecl, type_: FieldType) -> Scalar | None:
    """Return the default a declaration states; an unstated flag is false."""
    if decl.default is None:
        return False if type_ == "bool" else None
    if isinstance(decl.default, ast.Name):
        return decl.default.value
    value = decl.default.value
    return float(value) if type_ == "float" and not isinstance(value, bool) else value


# --------------------------------------------------------------------------
# Author fields: declared in a profile or a family
# --------------------------------------------------------------------------


def declarations(items: Iterable[object]) -> list[ast.FieldDecl]:
    """Return the field declarations among a profile's, a family's or a file's items."""
    return [item for item in items if isinstance(item, ast.FieldDecl)]


def lower_fields(items: Iterable[object]) -> tuple[Field, ...]:
    """Return the Fields a profile or family declares, in order, the first of a name winning."""
    found: dict[str, Field] = {}
    for decl in declarations(items):
        found.setdefault(decl.name.value, lower_field(decl))
    return tuple(found.values())


def author_fields(scope: Scope, profile: str | None) -> dict[str, Field]:
    """Return the author fields a model of `profile` may state: its profile's, then every family's.

    A standard field's name is left out (FIELDS holds it), and so is a name
    declared a second time (the first declaration wins; the check reports a
    second that disagrees).
    """
    found: dict[str, Field] = {}
    owners: list[ast.Profile | ast.Family] = [scope.profiles[profile]] if profile in scope.profiles else []
    owners += [scope.families[name] for name in sorted(scope.families)]
    for owner in owners:
        for decl in declarations(owner.items):
            if decl.name.value not in FIELDS:
                found.setdefault(decl.name.value, lower_field(decl))
    return found


def declared_dim_names(scope: Scope) -> frozenset[str]:
    """Return the author fields a layout's dims may read: every int or bool field a profile or family declares."""
    owners: list[ast.Profile | ast.Family] = [*scope.profiles.values(), *scope.families.values()]
    return frozenset(decl.name.value for owner in owners for decl in declarations(owner.items)
                     if field_type(decl) in ("int", "bool"))


# --------------------------------------------------------------------------
# The standard table
# --------------------------------------------------------------------------


def standard_declarations() -> list[ast.FieldDecl]:
    """Return the declarations of fields/model.hpf, in order."""
    from hpdsl.syntax import parse_text

    path = table_path().with_name("model.hpf")
    file = parse_text(path.read_text(encoding="utf-8"), str(path))
    return [item for item in file.items if isinstance(item, ast.FieldDecl)]


def render_table_json(fields: list[Field]) -> str:
    """Return the JSON text of fields/model.fields.json: one object per field, in order."""
    rows = [attrs.asdict(field) for field in fields]
    return json.dumps(rows, indent=1, ensure_ascii=False) + "\n"


def main() -> None:
    """Rewrite fields/model.fields.json from fields/model.hpf (run from a source checkout)."""
    path: Path = table_path()
    text = render_table_json([lower_field(decl) for decl in standard_declarations()])
    write_text_atomic(path, text)
    print(f"wrote {path} ({len(text):,} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
