"""What `hpdsl compile` of the standard library alone reports, kept on disk between runs.

The shipped library is the same every run of one hpdsl: its check (every
diagnostic, the summary counts, the sources they point into) is stored pickled
in the cache folder (hpdsl/resources.py `cache_folder`) under a key hashing
every file of the hpdsl package, the grammar, the shipped .hpf files and
Python's version, so any change to the code or the library misses it. A hit
imports no checker, parser or IR (bench/bench_startup.py). Only the plain
`hpdsl compile` (no paths, no -o) uses it; a read-only, missing or damaged cache
is ignored, and a miss compiles as usual.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpdsl.resources import cache_folder

Report = tuple[bool, dict[str, Any], tuple[Any, ...], dict[str, Any]]
"""(ok, summary, diagnostics, sources): what the compile command prints from."""


def stdlib_report(compute: Callable[[], Report]) -> Report:
    """Return the standard library's compile report: from the cache, or computed and stored."""
    path = _entry()
    if path is not None:
        found = _read(path)
        if found is not None:
            return found
    report = compute()
    if path is not None:
        _write(path, report)
    return report


def _entry() -> str | None:
    folder = cache_folder()
    if folder is None:
        return None
    from hpdsl.resources import data_dir, stdlib_files

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(repr(sys.version_info[:3]).encode())
    try:
        parts = [*sorted(package.rglob("*.py")), data_dir("grammar") / "hpdsl.lark",
                 *(path for _name, path in stdlib_files())]
        for part in parts:
            digest.update(str(part.relative_to(part.parents[1])).encode() + b"\0" + part.read_bytes())
    except (OSError, ValueError):  # a file we cannot read: no key to trust
        return None
    return os.path.join(folder, f"stdlib-{digest.hexdigest()[:32]}.pickle")


def _read(path: str) -> Report | None:
    try:
        with open(path, "rb") as handle:
            found = pickle.load(handle)  # noqa: S301 - written by _write, in the user's own cache
    except Exception:  # missing, unreadable or damaged: compile instead
        return None
    return found if isinstance(found, tuple) and len(found) == 4 else None


def _write(path: str, report: Report) -> None:
    try:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            pickle.dump(report, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)
        for name in os.listdir(folder):  # another hpdsl's report can never be read again
            if name.startswith("stdlib-") and name != os.path.basename(path):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name))
    except Exception:  # read-only or full: the cache is an optimisation only
        return
