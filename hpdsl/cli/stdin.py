"""`-` as a path: `hpdsl compile -` and `hpdsl fmt -` read one spec from standard input."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from hpdsl.diagnostics import Source
from hpdsl.errors import InputError

STDIN = "-"
STDIN_NAME = "<stdin>"
"""What diagnostics call the spec read from standard input."""


def wants_stdin(paths: Sequence[Path | str]) -> bool:
    """Return whether the paths ask for standard input; a usage error if `-` comes with other paths."""
    dashes = sum(str(path) == STDIN for path in paths)
    if dashes and len(paths) > 1:
        raise click.UsageError("'-' reads one spec from standard input: give it alone, without other paths")
    return bool(dashes)


def read_stdin() -> Source:
    """Read standard input (UTF-8, at most the loader's file limit) as one Source named <stdin>."""
    from hpdsl.loader import MAX_FILE_BYTES

    data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"cannot read '{STDIN_NAME}': it is larger than {MAX_FILE_BYTES // 1024} KiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"cannot read '{STDIN_NAME}': not UTF-8 (byte {error.start})") from None
    return Source(STDIN_NAME, text)
