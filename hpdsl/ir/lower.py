"""A checked scope and its sources into the RegistryIR that registry.json holds.

Only called on a scope without errors: each `lower_*` may assume the checks
passed. Tables are sorted by name and the sources are hashed in name order, so
the result does not depend on the order files were given or found in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from hpdsl.diagnostics import Source
from hpdsl.ir.lower_families import lower_family
from hpdsl.ir.lower_models import lower_model
from hpdsl.ir.lower_profiles import lower_profile, lower_vocabulary
from hpdsl.ir.nodes import SCHEMA_VERSION, RegistryIR, SourceRef
from hpdsl.scope import Scope


def lower_registry(scope: Scope, sources: Iterable[Source],
                   names: Mapping[str, str] | None = None) -> RegistryIR:
    """Lower every declaration in scope into one RegistryIR stamped with the sources' hash.

    `names` renames source files (display name to the name recorded), in every
    `source.file` and in the hash, so the registry does not depend on where it
    was compiled from (hpdsl.loader.Loaded.stable_names).
    """
    names = names or {}
    sources = [Source(names.get(s.name, s.name), s.text) for s in sources]
    registry = RegistryIR(
        schema_version=SCHEMA_VERSION,
        source_hash=source_hash(sources),
        ops=lower_vocabulary(scope),
        profiles={name: lower_profile(scope.profiles[name], scope) for name in sorted(scope.profiles)},
        families={name: lower_family(scope.families[name]) for name in sorted(scope.families)},
        models={name: lower_model(scope.models[name], scope) for name in sorted(scope.models)},
    )
    return _renamed(registry, names) if names else registry


def _renamed(value: Any, names: Mapping[str, str]) -> Any:
    """Return `value` with every SourceRef's file renamed by `names` (IR values are frozen)."""
    if isinstance(value, SourceRef):
        return SourceRef(names.get(value.file, value.file), value.line, value.col)
    if isinstance(value, tuple):
        return tuple(_renamed(item, names) for item in value)
    if isinstance(value, dict):
        return {key: _renamed(item, names) for key, item in value.items()}
    if attrs.has(type(value)):
        changes = {field.name: _renamed(getattr(value, field.name), names)
                   for field in attrs.fields(type(value)) if field.init}
        return type(value)(**changes)
    return value


def source_hash(sources: Iterable[Source]) -> str:
    """Return "sha256:" + the hash of the sorted (name, text) pairs of `sources`."""
    pairs = sorted((source.name, source.text) for source in sources)
    # JSON frames every name and text, so no two different lists hash alike.
    encoded = json.dumps(pairs, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return "sha256:" + hashlib.sha256(encoded).hexdigest()
