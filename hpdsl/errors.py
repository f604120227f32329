"""The one exception hierarchy: every error hpdsl raises is an HpdslError.

`str()` of each says what is wrong on its own: a SpecError lists its first
diagnostics and a LoadError the JSON paths it found bad, so a caller that only
prints the exception still sees where to look. The CLI prints `message` and
renders the details itself (hpdsl/cli/app.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from hpdsl.diagnostics.diagnostic import Diagnostic
from hpdsl.diagnostics.render import headline
from hpdsl.diagnostics.span import Source

# How many diagnostics or bad paths `str()` lists before "... and N more".
SHOWN_DIAGNOSTICS = 5
SHOWN_LOAD_ERRORS = 10


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

    def __str__(self) -> str:
        errors = [d for d in self.diagnostics if d.is_error] or list(self.diagnostics)
        return _with_lines(self.message, [headline(d) for d in errors], SHOWN_DIAGNOSTICS)


@attrs.frozen(auto_exc=True)
class LoadError(HpdslError):
    """A registry.json could not be read: bad JSON, wrong schema version, unknown keys."""

    errors: tuple[str, ...] = ()

    def __str__(self) -> str:
        return _with_lines(self.message, self.errors, SHOWN_LOAD_ERRORS)


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


def _with_lines(message: str, lines: Sequence[str], shown: int) -> str:
    """Return `message` and the first `shown` lines indented under it, then how many were left out."""
    listed = [f"  {line}" for line in lines[:shown]]
    if len(lines) > shown:
        listed.append(f"  ... and {len(lines) - shown} more")
    return "\n".join([message, *listed])
