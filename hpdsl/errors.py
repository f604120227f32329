"""The one exception hierarchy: every error hpdsl raises is an HpdslError."""

from __future__ import annotations

import attrs

from hpdsl.diagnostics.diagnostic import Diagnostic
from hpdsl.diagnostics.span import Source


@attrs.frozen(auto_exc=True)
class HpdslError(Exception):
    """Base of every error hpdsl raises on purpose."""

    message: str

    def __str__(self) -> str:
        return self.message


@attrs.frozen(auto_exc=True)
class SpecError(HpdslError):
    """The specs have errors: carries every diagnostic of the run (syntax errors included)."""

    diagnostics: tuple[Diagnostic, ...] = ()
    sources: dict[str, Source] = attrs.field(factory=dict, eq=False, repr=False)


@attrs.frozen(auto_exc=True)
class LoadError(HpdslError):
    """A registry.json could not be read: bad JSON, wrong schema version, unknown keys."""

    errors: tuple[str, ...] = ()


@attrs.frozen(auto_exc=True)
class ResolutionError(HpdslError):
    """A family request cannot be resolved to exactly one variant."""


@attrs.frozen(auto_exc=True)
class BuildError(HpdslError):
    """A resolved variant could not be constructed."""


@attrs.frozen(auto_exc=True)
class InputError(HpdslError):
    """A path given to hpdsl does not exist or cannot be read or written (a usage or I/O error)."""


@attrs.frozen(auto_exc=True)
class UnknownNameError(HpdslError):
    """A registry lookup names a profile, family or model the registry does not hold."""

    what: str = ""
    name: str = ""
