"""Reading a file the way hpdsl reads every input (a regular file only, a size cap, never blocking),
and writing one the way every output is written (all at once, the old file whole on failure).

The loader (.hpf sources) and load_registry (registry.json) both read through
here, so a FIFO, a device, a folder or an oversized file is refused with a
reason instead of blocking or filling memory (docs/trust.md).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from hpdsl.errors import InputError


class NotReadable(OSError):
    """A file that exists but is not one hpdsl reads: not regular, or too large."""


def read_text(path: str | os.PathLike[str], *, limit: int) -> str:
    """Read a regular file of at most `limit` bytes as UTF-8, never blocking on a FIFO."""
    return read_bytes(path, limit=limit).decode("utf-8")


def read_bytes(path: str | os.PathLike[str], *, limit: int, follow: bool = True) -> bytes:
    """Read a regular file of at most `limit` bytes, never blocking; with follow=False, not through a symlink."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    descriptor = os.open(Path(path), flags)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotReadable(f"it is {node_kind(mode)}, not a regular file")
        data = b""
        while len(data) <= limit:
            chunk = os.read(descriptor, limit + 1 - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) > limit:
            raise NotReadable(f"it is larger than {_size(limit)}")
    finally:
        os.close(descriptor)
    return data


def node_kind(mode: int) -> str:
    """Return what a file that is not regular is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def reason(exc: OSError | UnicodeDecodeError) -> str:
    """Return why a file could not be read, as the rest of a sentence."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, NotReadable):
        return str(exc)
    return (exc.strerror or str(exc)).lower()


def _size(limit: int) -> str:
    if limit >= 1 << 20:
        return f"{limit // (1 << 20)} MiB"
    return f"{limit // 1024} KiB" if limit >= 1 << 16 else f"{limit:,} bytes"




def write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` all at once: the old file stays whole if anything fails."""
    temp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
        temp = None
    except OSError as exc:
        raise InputError(f"cannot write '{path}': {(exc.strerror or str(exc)).lower()}") from None
    finally:
        if temp is not None:  # every failure path, KeyboardInterrupt included
            Path(temp).unlink(missing_ok=True)
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    # The rename itself is durable only once the folder's entry is on disk;
    # not every platform can open a folder, and the data is already safe.
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


__all__ = ["NotReadable", "node_kind", "read_bytes", "read_text", "reason", "write_text_atomic"]
