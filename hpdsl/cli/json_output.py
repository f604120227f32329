"""What every `--json` output shares: one `schema_version`, a schema per command, no wall-clock times.

Every JSON object a command prints goes through `emit_json`, which puts
`schema_version` first; docs/schemas/<command>.schema.json states each command's
object (docs/ci.md). The version changes only when a key is removed or changes
meaning; new keys keep it. A SARIF log is printed by `emit_raw_json`: its
schema forbids keys of ours at the top.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

SCHEMA_VERSION = 1
"""The version of every `--json` object's layout (docs/schemas/)."""

TIMINGS = ("seconds",)
"""Keys that hold wall-clock times: left out of JSON unless `--timings` asks (search)."""


def versioned(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return `data` with `schema_version` as its first key."""
    return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in data.items() if k != "schema_version"}}


def without_timings(data: Mapping[str, Any], *, timings: bool = False) -> dict[str, Any]:
    """Return `data` without its wall-clock keys (TIMINGS), unless `timings`: runs then compare equal."""
    return dict(data) if timings else {k: v for k, v in data.items() if k not in TIMINGS}


def emit_json(data: Mapping[str, Any]) -> None:
    """Print one JSON object, with `schema_version`, to stdout."""
    emit_raw_json(versioned(data))


def emit_raw_json(data: Mapping[str, Any]) -> None:
    """Print one JSON object to stdout exactly as given (a SARIF log)."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))
