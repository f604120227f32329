"""Hypothesis strategies for every IR class, derived from the attrs classes themselves.

Walking the type hints (not hand-writing one strategy per class) means a field
added to hpdsl/ir/nodes.py is generated, and round-tripped, without touching
this file. A field with a default draws that default often, so the converter's
"omit what equals the default" path is exercised as much as the other one.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union

import attrs
from hypothesis import strategies as st

from hpdsl.ir import nodes
from hpdsl.ir.nodes import SCHEMA_VERSION, RegistryIR

_CACHE: dict[type, st.SearchStrategy[Any]] = {}

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
"""Strings: any text, including quotes, escapes and non-ASCII (registry.json is UTF-8)."""

_PRIMITIVES: dict[Any, st.SearchStrategy[Any]] = {
    bool: st.booleans(),
    int: st.integers(min_value=-(2**53), max_value=2**53),
    float: st.floats(allow_nan=False, allow_infinity=False),
    str: names,
    type(None): st.none(),
}


def ir_classes() -> list[type]:
    """Return every attrs class the IR module defines, in definition order."""
    return [value for value in vars(nodes).values()
            if isinstance(value, type) and attrs.has(value) and value.__module__ == nodes.__name__]


def for_class(cls: type) -> st.SearchStrategy[Any]:
    """Return a strategy for instances of an IR class (recursive classes included)."""
    if cls not in _CACHE:
        # Deferred, so a class that contains itself (Condition) refers to this very strategy.
        _CACHE[cls] = st.deferred(lambda: _build(cls))
    return _CACHE[cls]


def _build(cls: type) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    fields = {field.name: _field(field, hints[field.name]) for field in attrs.fields(cls)}
    return st.builds(cls, **fields)


def _field(field: attrs.Attribute, tp: Any) -> st.SearchStrategy[Any]:
    strategy = for_type(tp)
    default = field.default
    if default is attrs.NOTHING:
        return strategy
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return st.builds(default.factory) | strategy
    return st.just(default) | strategy


def for_type(tp: Any) -> st.SearchStrategy[Any]:
    """Return a strategy for one type annotation of the IR."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _PRIMITIVES:
        return _PRIMITIVES[tp]
    if attrs.has(tp):
        return for_class(tp)
    if origin is Literal:
        return st.sampled_from(args)
    if origin is tuple:
        return st.lists(for_type(args[0]), max_size=3).map(tuple)
    if origin is dict:
        return st.dictionaries(names, for_type(args[1]), max_size=3)
    if origin in (Union, types.UnionType):
        return st.one_of([for_type(arg) for arg in args])
    raise TypeError(f"no strategy for the IR type {tp!r}")


def registries() -> st.SearchStrategy[RegistryIR]:
    """Return a strategy for whole registries of the supported schema version."""
    return for_class(RegistryIR).map(lambda r: attrs.evolve(r, schema_version=SCHEMA_VERSION))
