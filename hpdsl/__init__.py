"""hpdsl: a declarative DSL and compiler for how large models are assembled, parallelised and priced.

The public names are imported on first use, so `import hpdsl` stays fast and
loading a registry never imports the grammar (lark) or torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpdsl.api import compile_paths, compile_sources, lower, parse
    from hpdsl.errors import HpdslError, LoadError, SpecError
    from hpdsl.registry import Registry, load_registry

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "load_registry": "hpdsl.registry",
    "Registry": "hpdsl.registry",
    "compile_paths": "hpdsl.api",
    "compile_sources": "hpdsl.api",
    "parse": "hpdsl.api",
    "lower": "hpdsl.api",
    "HpdslError": "hpdsl.errors",
    "SpecError": "hpdsl.errors",
    "LoadError": "hpdsl.errors",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    """Import a public name on first use."""
    if name == "__version__":
        return _version()
    if name in _EXPORTS:
        module = importlib.import_module(_EXPORTS[name])
        # Bind every export of that module, so later lookups skip this function.
        # (The check stage is hpdsl.api.check: `hpdsl.check` is the subpackage.)
        for export, home in _EXPORTS.items():
            if home == module.__name__:
                globals()[export] = getattr(module, export)
        return globals()[name]
    raise AttributeError(f"module 'hpdsl' has no attribute {name!r}")


def __dir__() -> list[str]:
    """List the public names too, before they are imported."""
    return sorted({*globals(), *__all__})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hpdsl")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"
