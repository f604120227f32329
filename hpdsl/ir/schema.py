"""The IR's attrs classes into a JSON Schema (draft 2020-12) of registry.json.

Generated from the classes themselves, so the schema cannot drift from the IR;
docs/registry.schema.json is this module's output (`python -m hpdsl.ir.schema`)
and a test keeps the two equal. Every object is closed (`additionalProperties:
false`), as the converter forbids unknown keys; a field with a default is
optional, as the converter omits it when it equals the default.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal, Union

import attrs

from hpdsl.ir.nodes import SCHEMA_VERSION, RegistryIR

DIALECT = "https://json-schema.org/draft/2020-12/schema"

_PRIMITIVES: dict[Any, str] = {
    bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null",
}


def registry_schema() -> dict[str, Any]:
    """Return the JSON Schema of registry.json."""
    defs: dict[str, Any] = {}
    _define(RegistryIR, defs)
    defs["RegistryIR"]["properties"]["schema_version"] = {"const": SCHEMA_VERSION}
    return {
        "$schema": DIALECT,
        "title": "hpdsl registry",
        "description": f"registry.json, schema_version {SCHEMA_VERSION}: what `hpdsl compile -o` "
                       "writes and `hpdsl.load_registry` reads.",
        "$ref": "#/$defs/RegistryIR",
        "$defs": dict(sorted(defs.items())),
    }


def _define(cls: type, defs: dict[str, Any]) -> dict[str, str]:
    """Add `cls` (and every class it refers to) to `defs`; return a reference to it."""
    ref = {"$ref": f"#/$defs/{cls.__name__}"}
    if cls.__name__ in defs:
        return ref
    defs[cls.__name__] = {}  # placed first, so recursive classes (Condition) terminate
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    required = []
    for field in attrs.fields(cls):
        properties[field.name] = _field_schema(field, hints[field.name], defs)
        if field.default is attrs.NOTHING:
            required.append(field.name)
    defs[cls.__name__] = {
        "type": "object",
        "description": _summary(cls),
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return ref


def _field_schema(field: attrs.Attribute, tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    schema = _type_schema(tp, defs)
    default = _json_default(field.default)
    if default is not attrs.NOTHING:
        schema = {**schema, "default": default}
    return schema


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """Return the schema of one type annotation of the IR."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _PRIMITIVES:
        return {"type": _PRIMITIVES[tp]}
    if attrs.has(tp):
        return _define(tp, defs)
    if origin is Literal:
        return {"enum": list(args)}
    if origin is tuple:
        return {"type": "array", "items": _type_schema(args[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type_schema(args[1], defs)}
    if origin in (Union, types.UnionType):
        return _union_schema(args, defs)
    raise TypeError(f"no JSON Schema for the IR type {tp!r}")


def _union_schema(args: tuple[Any, ...], defs: dict[str, Any]) -> dict[str, Any]:
    if all(arg in _PRIMITIVES for arg in args):
        return {"type": [_PRIMITIVES[arg] for arg in args]}
    return {"anyOf": [_type_schema(arg, defs) for arg in args]}


_FACTORY: Any = type(attrs.Factory(list))  # attrs' stubs type Factory as a function; this is its class


def _json_default(default: Any) -> Any:
    """Return a field's default as JSON, or NOTHING when it has none worth stating."""
    if isinstance(default, _FACTORY):
        default = default.factory()
    if default is None or isinstance(default, (bool, int, float, str)):
        return default
    if isinstance(default, (tuple, list, dict)) and not default:
        return [] if not isinstance(default, dict) else {}
    if attrs.has(type(default)):
        return attrs.asdict(default)
    return attrs.NOTHING


def _summary(cls: type) -> str:
    doc = (cls.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else cls.__name__


def render_schema() -> str:
    """Return the schema as docs/registry.schema.json holds it."""
    return json.dumps(registry_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render_schema(), end="")
