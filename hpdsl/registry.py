"""A compiled registry: lookups by name, copies by `with_*`, registry.json in and out.

`hpdsl.compile_paths` / `compile_sources` return a Registry (with the
compilation's warnings on `warnings`); `load_registry` reads one from
registry.json.

This is the embedding side of hpdsl: it needs neither the grammar (lark) nor
torch, only the IR and its converter, so a library can load a compiled
registry at import time cheaply.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

import attrs

from hpdsl.diagnostics.diagnostic import Diagnostic
from hpdsl.errors import LoadError, UnknownNameError
from hpdsl.files import read_text, reason
from hpdsl.ir.nodes import ClusterIR, DeviceIR, FamilyIR, ModelIR, OpInfo, ProfileIR, RegistryIR

_T = TypeVar("_T")


@attrs.frozen
class Registry:
    """An immutable view over a compiled RegistryIR, with the warnings its compilation reported.

    `warnings` is empty for a registry loaded from registry.json (the file keeps
    no diagnostics) and does not take part in equality.
    """

    ir: RegistryIR
    warnings: tuple[Diagnostic, ...] = attrs.field(default=(), eq=False, repr=False)

    # --- reading ---------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """Return the registry's schema version."""
        return self.ir.schema_version

    @property
    def source_hash(self) -> str:
        """Return the hash of the sources the registry was compiled from."""
        return self.ir.source_hash

    @property
    def ops(self) -> tuple[OpInfo, ...]:
        """Return the op vocabulary, in vector order."""
        return self.ir.ops

    @property
    def profiles(self) -> Mapping[str, ProfileIR]:
        """Return every profile by name (read-only)."""
        return MappingProxyType(self.ir.profiles)

    @property
    def families(self) -> Mapping[str, FamilyIR]:
        """Return every family by name (read-only)."""
        return MappingProxyType(self.ir.families)

    @property
    def models(self) -> Mapping[str, ModelIR]:
        """Return every model by name (read-only)."""
        return MappingProxyType(self.ir.models)

    @property
    def devices(self) -> Mapping[str, DeviceIR]:
        """Return every device by name (read-only)."""
        return MappingProxyType(self.ir.devices)

    @property
    def clusters(self) -> Mapping[str, ClusterIR]:
        """Return every cluster by name (read-only)."""
        return MappingProxyType(self.ir.clusters)

    def profile(self, name: str) -> ProfileIR:
        """Return the profile `name`; raise UnknownNameError naming the closest ones."""
        return _lookup(self.ir.profiles, "profile", name)

    def family(self, name: str) -> FamilyIR:
        """Return the family `name`; raise UnknownNameError naming the closest ones."""
        return _lookup(self.ir.families, "family", name)

    def model(self, name: str) -> ModelIR:
        """Return the model `name`; raise UnknownNameError naming the closest ones."""
        return _lookup(self.ir.models, "model", name)

    # --- copies ----------------------------------------------------------

    def with_profile(self, profile: ProfileIR) -> Registry:
        """Return a copy holding `profile`, replacing one of the same name."""
        return attrs.evolve(self, ir=attrs.evolve(self.ir, profiles={**self.ir.profiles, profile.name: profile}))

    def with_family(self, family: FamilyIR) -> Registry:
        """Return a copy holding `family`, replacing one of the same name."""
        return attrs.evolve(self, ir=attrs.evolve(self.ir, families={**self.ir.families, family.name: family}))

    def with_model(self, model: ModelIR) -> Registry:
        """Return a copy holding `model`, replacing one of the same name."""
        return attrs.evolve(self, ir=attrs.evolve(self.ir, models={**self.ir.models, model.name: model}))

    # --- serialising -----------------------------------------------------

    def to_json(self) -> str:
        """Return the registry as registry.json text."""
        from hpdsl.ir.convert import registry_to_json  # cattrs only when serialising: `hpdsl compile` checks

        return registry_to_json(self.ir)

    @classmethod
    def from_json(cls, text: str, *, name: str = "<string>") -> Registry:
        """Return the registry of registry.json text; raise LoadError naming `name`."""
        from hpdsl.ir.convert import registry_from_data

        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LoadError(f"{name}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}",
                            (f"{name}:{exc.lineno}:{exc.colno}: {exc.msg}",)) from None
        except (RecursionError, ValueError) as exc:  # nesting too deep, an int of too many digits
            reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
            raise LoadError(f"{name}: not a registry: {reason}", (f"$: {reason}",)) from None
        try:
            return cls(registry_from_data(data))
        except LoadError as exc:
            raise LoadError(f"{name}: {exc.message}", exc.errors) from None
        except RecursionError:
            raise LoadError(f"{name}: not a registry: nested too deep",
                            ("$: nested too deep",)) from None


MAX_REGISTRY_BYTES = 256 << 20
"""The largest registry.json load_registry reads (a FIFO, a device or a larger file is refused)."""


def load_registry(path: str | os.PathLike[str]) -> Registry:
    """Load a registry.json; raise LoadError if it cannot be read or does not match the schema."""
    try:
        text = read_text(path, limit=MAX_REGISTRY_BYTES)
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadError(f"cannot read registry {os.fspath(path)!r}: {reason(exc)}") from None
    return Registry.from_json(text, name=os.fspath(path))


def _lookup(table: dict[str, _T], what: str, name: str) -> _T:
    if name in table:
        return table[name]
    close = difflib.get_close_matches(name, sorted(table), n=1)
    if close:
        hint = f"did you mean '{close[0]}'?"
    elif table:
        hint = "it holds " + ", ".join(f"'{n}'" for n in sorted(table)[:12])
    else:
        hint = f"it holds no {what}"
    raise UnknownNameError(f"the registry has no {what} '{name}'; {hint}", what, name)
