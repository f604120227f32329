"""Where the shipped data lives: grammar, standard fields, profiles, families and devices.

In a wheel they are inside the package (hpdsl/_data/...); in a source checkout
or an editable install they are the top-level folders beside the package.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """Return the folder of shipped data `name` (grammar, fields, profiles, families or devices)."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"hpdsl's shipped folder {name!r} is missing from the installation")


STDLIB_FOLDERS = ("fields", "profiles", "families", "devices")
STDLIB_PREFIX = "<hpdsl>"


def stdlib_files() -> list[tuple[str, Path]]:
    """Return (display name, path) of every shipped .hpf file, in a stable order."""
    files = []
    for folder in STDLIB_FOLDERS:
        for path in sorted(data_dir(folder).glob("*.hpf")):
            files.append((f"{STDLIB_PREFIX}/{folder}/{path.name}", path))
    return files


CACHE_VARIABLE = "HPDSL_CACHE_DIR"
"""Where the LALR tables and the shipped files' parses are cached (default: $XDG_CACHE_HOME/hpdsl or
~/.cache/hpdsl); "" turns it off."""


def cache_folder() -> str | None:
    """Return the cache folder, or None when caching is off."""
    folder = os.environ.get(CACHE_VARIABLE)
    if folder is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(base, "hpdsl")
    return folder or None
