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
from hpdsl.ir.lower_machines import lower_cluster, lower_device
from hpdsl.ir.lower_models import lower_model
from hpdsl.ir.lower_profiles import lower_profile, lower_vocabulary
from hpdsl.ir.nodes import SCHEMA_VERSION, FamilyIR, ModelIR, ProfileIR, RegistryIR, SourceRef
from hpdsl.scope import Scope


@attrs.frozen
class Lowered:
    """Declarations the check already lowered (hpdsl/check/clean.py): lower_registry reuses them."""

    profiles: Mapping[str, ProfileIR] = attrs.field(factory=dict)
    families: Mapping[str, FamilyIR] = attrs.field(factory=dict)
    models: Mapping[str, ModelIR] = attrs.field(factory=dict)


def lower_registry(scope: Scope, sources: Iterable[Source],
                   names: Mapping[str, str] | None = None, *, lowered: Lowered = Lowered()) -> RegistryIR:
    """Lower every declaration in scope into one RegistryIR stamped with the sources' hash.

    `names` renames source files (display name to the name recorded), in every
    `source.file` and in the hash, so the registry does not depend on where it
    was compiled from (hpdsl.loader.Loaded.stable_names). What `lowered` holds
    (the check's lowering) is taken as it is; only the rest is lowered here.
    """
    names = names or {}
    sources = [Source(names.get(s.name, s.name), s.text) for s in sources]
    registry = RegistryIR(
        schema_version=SCHEMA_VERSION,
        source_hash=source_hash(sources),
        ops=lower_vocabulary(scope),
        profiles={name: lowered.profiles.get(name) or lower_profile(scope.profiles[name], scope)
                  for name in sorted(scope.profiles)},
        families={name: lowered.families.get(name) or lower_family(scope.families[name])
                  for name in sorted(scope.families)},
        models={name: lowered.models.get(name) or lower_model(scope.models[name], scope)
                for name in sorted(scope.models)},
        devices={name: lower_device(scope.devices[name]) for name in sorted(scope.devices)},
        clusters={name: lower_cluster(scope.clusters[name]) for name in sorted(scope.clusters)},
    )
    return _renamed(registry, names) if names else registry


_LEAVES = (str, int, float, bool, type(None))
_INIT_FIELDS: dict[type, tuple[str, ...]] = {}


def _renamed(value: Any, names: Mapping[str, str]) -> Any:
    """Return `value` with every SourceRef's file renamed by `names` (IR values are frozen).

    A part with nothing renamed in it is returned as it is, not rebuilt: most of a
    registry is the standard library, whose `<hpdsl>/...` names never change.
    """
    if isinstance(value, _LEAVES):
        return value
    if isinstance(value, SourceRef):
        name = names.get(value.file, value.file)
        return value if name == value.file else SourceRef(name, value.line, value.col)
    if isinstance(value, tuple):
        items = tuple(_renamed(item, names) for item in value)
        return value if all(a is b for a, b in zip(items, value)) else items
    if isinstance(value, dict):
        entries = {key: _renamed(item, names) for key, item in value.items()}
        return value if all(entries[key] is item for key, item in value.items()) else entries
    fields = _INIT_FIELDS.get(type(value))
    if fields is None:
        fields = tuple(f.name for f in attrs.fields(type(value)) if f.init) if attrs.has(type(value)) else ()
        _INIT_FIELDS[type(value)] = fields
    if not fields:
        return value
    changes = {name: _renamed(getattr(value, name), names) for name in fields}
    if all(changes[name] is getattr(value, name) for name in fields):
        return value
    return type(value)(**changes)


def source_hash(sources: Iterable[Source]) -> str:
    """Return "sha256:" + the hash of the sorted (name, text) pairs of `sources`."""
    pairs = sorted((source.name, source.text) for source in sources)
    # JSON frames every name and text, so no two different lists hash alike.
    encoded = json.dumps(pairs, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return "sha256:" + hashlib.sha256(encoded).hexdigest()
