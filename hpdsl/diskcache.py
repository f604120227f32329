"""Entries of the user's cache folder: plain JSON, verified on every read, written atomically, kept private.

An entry is two lines: a header (JSON) naming the entry's kind, the format, the
full key it was stored under (the caller's hash of everything the answer depends
on, hpdsl's own code included) and the SHA-256 of the second line; and the
payload (JSON). Nothing in it can run code: JSON holds only
dicts, lists, strings, numbers, booleans and null, and each caller rebuilds its
values from them by shape (hpdsl/cli/checked.py). An entry is read through
hpdsl's safe reader (a regular file owned by the user, not through a symlink,
at most MAX_ENTRY_BYTES, never blocking on a FIFO); any entry that is missing,
unreadable, malformed, of another kind, format or key, or whose
payload does not hash to its header is a miss, and the caller computes the
answer and writes the entry again. The folder (hpdsl/resources.py
`cache_folder`) is used only if the user owns it and nobody else may write
into it: anyone who can is able to plant an entry, so the cache is then
skipped, said once on stderr (docs/caches.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
import tempfile
from functools import cache
from typing import Any

from hpdsl.files import read_bytes
from hpdsl.resources import cache_folder

FORMAT = 1
MAX_ENTRY_BYTES = 8 << 20
"""Far above any entry hpdsl writes (the standard library's report is about 60 KB)."""

SUFFIX = ".json"
_LEGACY = ("stdlib-", "parse-", "grammar-")  # pickles and Lark caches of earlier hpdsl versions


def read_entry(kind: str, key: str) -> Any:
    """Return the payload stored for (kind, key), or None on a miss of any cause."""
    folder = private_folder()
    if folder is None:
        return None
    try:
        data = read_bytes(os.path.join(folder, _name(kind, key)), limit=MAX_ENTRY_BYTES, follow=False)
    except (OSError, ValueError):
        return None
    return _payload(data, kind, key)


def write_entry(kind: str, key: str, payload: Any) -> None:
    """Store `payload` (plain JSON data) for (kind, key), replacing the kind's other entries; never raise."""
    folder = private_folder()
    if folder is None:
        return
    try:
        body = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except (TypeError, ValueError, RecursionError):  # not plain data (or a lone surrogate): nothing to store
        return
    header = {"hpdsl": kind, "format": FORMAT, "key": key, "sha256": hashlib.sha256(body).hexdigest()}
    data = json.dumps(header, separators=(",", ":")).encode() + b"\n" + body + b"\n"
    name = _name(kind, key)
    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")  # mode 0600
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, os.path.join(folder, name))  # a reader sees the old entry or the new
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            raise
    except OSError:  # read-only or full: the cache is an optimisation only
        return
    _prune(folder, kind, name)


def _name(kind: str, key: str) -> str:
    return f"{kind}-{key[:32]}{SUFFIX}"


def _payload(data: bytes, kind: str, key: str) -> Any:
    """Return the payload of an entry's bytes if every check holds, else None."""
    head, newline, body = data.partition(b"\n")
    if not newline or not body.endswith(b"\n"):
        return None  # truncated
    try:
        header = json.loads(head)
        if not isinstance(header, dict) or header != {
                "hpdsl": kind, "format": FORMAT, "key": key,
                "sha256": hashlib.sha256(body[:-1]).hexdigest()}:
            return None
        return json.loads(body)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested past Python's stack
        return None


@cache
def private_folder() -> str | None:
    """Return the cache folder if caching is on and the folder is safe to use, else None (said once)."""
    folder = cache_folder()
    if folder is None:
        return None
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.stat(folder)
    except (OSError, ValueError):  # cannot be made (a file in the way, read-only): caching is off
        return None
    problem = unsafe(info)
    if problem is not None:
        print(f"hpdsl: not caching in '{folder}': {problem}", file=sys.stderr)
        return None
    return folder


def unsafe(info: os.stat_result) -> str | None:
    """Return why a folder with this status may not hold the cache (found, then the fix), or None."""
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder; point HPDSL_CACHE_DIR at a folder"
    owner = getattr(os, "geteuid", None)
    if owner is None:  # no owners to compare (Windows): the folder is the user's profile's
        return None
    if info.st_uid != owner():
        return (f"it belongs to another user (uid {info.st_uid}), who could plant entries in it; "
                "point HPDSL_CACHE_DIR at a folder of your own")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"others may write into it (mode {stat.S_IMODE(info.st_mode):04o}) and plant entries; "
                "make it private (chmod go-w) to cache again")
    return None


def _prune(folder: str, kind: str, keep: str) -> None:
    """Remove the kind's other entries (another hpdsl wrote them) and earlier versions' pickles."""
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            stale = name.startswith(f"{kind}-") and name != keep
            if stale or (name.startswith(_LEGACY) and name.endswith((".pickle", ".lark"))):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name))
