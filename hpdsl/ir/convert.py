"""IR values into JSON-ready data and back: the one cattrs converter, every hook in one place.

Structuring is strict, because registry.json is a contract, not a config file
to be guessed at: a string is not an int, a bool is not an int (an int is
accepted where a float is expected), unknown keys are errors, and a failure
names the JSON path of every bad value (`$.profiles.qwen.kinds.decoder.ops.attMM:
expected an integer, found the string '4'`). Unstructuring omits every field
equal to its default ("absent is not zero": an unset fact stays absent), writes
tuples as lists and keeps dicts in their stable order.
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar, Union

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn

from hpdsl.errors import LoadError
from hpdsl.ir.nodes import SCHEMA_VERSION, RegistryIR
from hpdsl.ir.validate import registry_problems

T = TypeVar("T")

_PRIMITIVES: dict[type, str] = {
    bool: "a boolean", int: "an integer", float: "a number", str: "a string", type(None): "null",
}
_REGISTRY_TABLES = ("profiles", "families", "models", "devices", "clusters")
_OPTIONAL_TABLES = ("devices", "clusters")


# --------------------------------------------------------------------------
# Describing what was found
# --------------------------------------------------------------------------


def describe(value: Any) -> str:
    """Return how a JSON value reads in an error message ("the string '4'")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


# --------------------------------------------------------------------------
# Type predicates
# --------------------------------------------------------------------------


def _union_args(tp: Any) -> tuple[Any, ...]:
    if typing.get_origin(tp) in (Union, types.UnionType):
        return typing.get_args(tp)
    return ()


def _is_scalar_union(tp: Any) -> bool:
    args = _union_args(tp)
    return bool(args) and all(arg in _PRIMITIVES for arg in args)


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is Literal


def _is_tuple(tp: Any) -> bool:
    return typing.get_origin(tp) is tuple


def _is_dict(tp: Any) -> bool:
    return typing.get_origin(tp) is dict


# --------------------------------------------------------------------------
# Structure hooks
# --------------------------------------------------------------------------


def _primitive_hook(expected: type) -> Callable[[Any, Any], Any]:
    def hook(value: Any, _: Any) -> Any:
        if type(value) is expected:
            return value
        if expected is float and type(value) is int:  # JSON does not tell 1 from 1.0
            return float(value)
        raise TypeError(f"expected {_PRIMITIVES[expected]}, found {describe(value)}")
    return hook


def _scalar_union_hook(tp: Any, _: cattrs.Converter) -> Callable[[Any, Any], Any]:
    allowed = typing.get_args(tp)
    words = _either([_PRIMITIVES[arg] for arg in allowed])

    def hook(value: Any, _: Any) -> Any:
        if type(value) in allowed:
            return value
        if type(value) is int and float in allowed:
            return float(value)
        raise TypeError(f"expected {words}, found {describe(value)}")
    return hook


def _either(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _literal_hook(tp: Any, _: cattrs.Converter) -> Callable[[Any, Any], Any]:
    allowed = typing.get_args(tp)
    words = ", ".join(json.dumps(arg) for arg in allowed)

    def hook(value: Any, _: Any) -> Any:
        # `in` alone would accept True for 1; the type must match too.
        if any(type(value) is type(arg) and value == arg for arg in allowed):
            return value
        raise ValueError(f"expected one of {words}, found {describe(value)}")
    return hook


def _note(exc: Exception, index: int | str, tp: Any) -> Exception:
    note = IterableValidationNote(f"Structuring @ {index!r}", index, tp)
    # `__notes__` is an attribute of Python 3.11's exceptions; cattrs reads it on 3.10 as well.
    setattr(exc, "__notes__", [*getattr(exc, "__notes__", []), note])  # noqa: B010
    return exc


def _tuple_hook(tp: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    args = typing.get_args(tp)
    if len(args) != 2 or args[1] is not Ellipsis:
        raise TypeError(f"the IR uses only homogeneous tuples, not {tp!r}")
    item_type = args[0]

    def hook(value: Any, _: Any) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise TypeError(f"expected a list, found {describe(value)}")
        # Look the item hook up at call time, so recursive types (Condition) need no care.
        structure = conv.get_structure_hook(item_type)
        items, errors = [], []
        for index, item in enumerate(value):
            try:
                items.append(structure(item, item_type))
            except Exception as exc:  # noqa: BLE001 - collected and re-raised as a group
                errors.append(_note(exc, index, item_type))
        if errors:
            raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
        return tuple(items)
    return hook


def _dict_hook(tp: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    key_type, value_type = typing.get_args(tp)

    def hook(value: Any, _: Any) -> dict[Any, Any]:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, found {describe(value)}")
        structure_key = conv.get_structure_hook(key_type)
        structure_value = conv.get_structure_hook(value_type)
        result, errors = {}, []
        for key, item in value.items():
            try:
                result[structure_key(key, key_type)] = structure_value(item, value_type)
            except Exception as exc:  # noqa: BLE001 - collected and re-raised as a group
                errors.append(_note(exc, key, value_type))
        if errors:
            raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
        return result
    return hook


def _attrs_hook(cls: type, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    structure: Callable[..., Any] = make_dict_structure_fn(cls, conv)

    def hook(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object ({cls.__name__}), found {describe(value)}")
        return structure(value, cls)
    return hook


# --------------------------------------------------------------------------
# Unstructure hooks
# --------------------------------------------------------------------------


def _registry_unstructure_hook(conv: cattrs.Converter) -> Callable[[RegistryIR], dict[str, Any]]:
    # The three first tables are always written, even when empty, and sorted by name so
    # a registry built by hand (Registry.with_*) serialises like a compiled one; devices
    # and clusters only when some are declared (a registry without them reads as before).
    base = make_dict_unstructure_fn(RegistryIR, conv, _cattrs_omit_if_default=False)

    def hook(registry: RegistryIR) -> dict[str, Any]:
        data = base(registry)
        for table in _REGISTRY_TABLES:
            if table in _OPTIONAL_TABLES and not data[table]:
                del data[table]
            else:
                data[table] = dict(sorted(data[table].items()))
        return data
    return hook


def make_converter() -> cattrs.Converter:
    """Return a new converter with every IR hook registered."""
    conv = cattrs.Converter(omit_if_default=True, forbid_extra_keys=True)
    for primitive in (bool, int, float, str):
        conv.register_structure_hook(primitive, _primitive_hook(primitive))
    conv.register_structure_hook_factory(attrs.has, _attrs_hook)
    conv.register_structure_hook_factory(_is_tuple, _tuple_hook)
    conv.register_structure_hook_factory(_is_dict, _dict_hook)
    conv.register_structure_hook_factory(_is_literal, _literal_hook)
    conv.register_structure_hook_factory(_is_scalar_union, _scalar_union_hook)
    conv.register_unstructure_hook(RegistryIR, _registry_unstructure_hook(conv))
    return conv


CONVERTER = make_converter()
"""The converter every module uses; build another only to experiment."""


# --------------------------------------------------------------------------
# Errors as `$.path: message` lines
# --------------------------------------------------------------------------


def _key_path(path: str, key: int | str) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def _message(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return "a required key is missing"
    if isinstance(exc, (TypeError, ValueError)) and exc.args:
        return str(exc.args[0])
    return f"{type(exc).__name__}: {exc}"


def _extra_keys(exc: ForbiddenExtraKeysError, path: str) -> list[str]:
    known = [field.name for field in attrs.fields(exc.cl)]
    lines = []
    for key in sorted(exc.extra_fields):
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"did you mean '{close[0]}'?" if close else "expected one of " + ", ".join(known)
        lines.append(f"{_key_path(path, key)}: unknown key in {exc.cl.__name__}; {hint}")
    return lines


def error_lines(exc: BaseException, path: str = "$") -> list[str]:
    """Return one `$.path: message` line per failure inside a structuring error."""
    if isinstance(exc, ForbiddenExtraKeysError):
        return _extra_keys(exc, path)
    if not isinstance(exc, (ClassValidationError, IterableValidationError)):
        return [f"{path}: {_message(exc)}"]
    with_notes, without = exc.group_exceptions()
    lines = []
    for sub, note in with_notes:
        name = note.name if isinstance(note, AttributeValidationNote) else note.index
        sub_path = _key_path(path, name)
        if isinstance(sub, KeyError):
            lines.append(f"{sub_path}: the required key is missing")
        else:
            lines.extend(error_lines(sub, sub_path))
    for sub in without:
        lines.extend(error_lines(sub, path))
    return lines


# --------------------------------------------------------------------------
# The public conversions
# --------------------------------------------------------------------------


def unstructure(value: Any) -> Any:
    """Return an IR value as JSON-ready data (defaults omitted, tuples as lists)."""
    return CONVERTER.unstructure(value)


def structure(data: Any, cls: type[T]) -> T:
    """Return `data` structured as `cls`; raise LoadError naming the path of every bad value."""
    try:
        return CONVERTER.structure(data, cls)
    except Exception as exc:  # noqa: BLE001 - every structuring failure becomes a LoadError
        lines = tuple(error_lines(exc))
        noun = "error" if len(lines) == 1 else "errors"
        raise LoadError(f"not a valid {cls.__name__} ({len(lines)} {noun})", lines) from None


def registry_to_json(registry: RegistryIR) -> str:
    """Return the registry.json text: deterministic bytes, indent 2, trailing newline."""
    data = unstructure(registry)
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def registry_from_data(data: Any) -> RegistryIR:
    """Return the RegistryIR of parsed registry.json data; raise LoadError on any mismatch."""
    if not isinstance(data, dict):
        raise LoadError("a registry must be a JSON object",
                        (f"$: expected an object, found {describe(data)}",))
    _check_version(data.get("schema_version", None), "schema_version" in data)
    registry = structure(data, RegistryIR)
    problems = registry_problems(registry)
    if problems:
        noun = "problem" if len(problems) == 1 else "problems"
        raise LoadError(f"an inconsistent registry ({len(problems)} {noun})", tuple(problems))
    return registry


def _check_version(version: Any, present: bool) -> None:
    # Checked before anything else: a registry of another version fails on its
    # version, not on the hundred keys that moved between versions.
    if type(version) is int and version == SCHEMA_VERSION:
        return
    found = describe(version) if present else "no schema_version"
    message = (f"unsupported registry schema_version: found {found}, but this hpdsl reads "
               f"version {SCHEMA_VERSION}; recompile the specs with this hpdsl")
    raise LoadError(message, (f"$.schema_version: expected {SCHEMA_VERSION}, found {found}",))


__all__ = ["CONVERTER", "describe", "error_lines", "make_converter", "registry_from_data",
           "registry_to_json", "structure", "unstructure"]
