"""A project's `[tool.hpdsl]` table in pyproject.toml: the CLI's defaults for that project.

The nearest pyproject.toml with a `[tool.hpdsl]` table, walking up from the working
directory, gives (docs/ci.md, "Project configuration"):

    [tool.hpdsl]
    paths = ["specs/"]               # what compile, fmt, stack, estimate, search, explain, train read
    import-paths = ["vendor/hpf"]    # compile --import-path
    trusted = ["my_pkg.layers"]      # trusted factory prefixes (docs/trust.md), added to HPDSL_TRUSTED
    [tool.hpdsl.strategy]            # the default strategy of estimate, diff and train
    tp = 8
    pp = 2
    device = "h200"

Paths are relative to the pyproject.toml's folder. They become click's default map,
so a flag or argument given on the command line wins. A malformed table is a usage
error (exit 2) that names the file and the key.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

PYPROJECT = "pyproject.toml"
TRUSTED_VARIABLE = "HPDSL_TRUSTED"  # the same variable hpdsl/torch/resolve.py reads

PATH_COMMANDS = ("compile", "fmt", "stack", "estimate", "search", "explain", "train")
"""The commands whose PATHS argument `paths` fills."""

STRATEGY_COMMANDS = ("estimate", "diff", "train")
"""The commands whose strategy flags `[tool.hpdsl.strategy]` fills."""

_KEYS = ("paths", "import-paths", "trusted", "strategy")


def find_config(start: Path) -> tuple[Path, Mapping[str, Any]] | None:
    """Return the nearest pyproject.toml at or above `start` that has `[tool.hpdsl]`, and that table."""
    for folder in (start, *start.parents):
        candidate = folder / PYPROJECT
        if candidate.is_file():
            table = _read(candidate).get("tool", {}).get("hpdsl")
            if table is not None:
                return candidate, table
    return None


def _read(path: Path) -> Mapping[str, Any]:
    toml: Any = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    try:
        with path.open("rb") as handle:
            data = toml.load(handle)
    except OSError as error:
        raise click.UsageError(f"cannot read {path}: {error.strerror or error}") from None
    except toml.TOMLDecodeError as error:
        raise click.UsageError(f"{path} is not valid TOML: {error}") from None
    return data if isinstance(data, dict) else {}


def default_map(path: Path, table: Any, cwd: Path) -> dict[str, dict[str, Any]]:
    """Return click's default map of a `[tool.hpdsl]` table; a usage error naming the key if malformed."""
    where = f"[tool.hpdsl] in {path}"
    if not isinstance(table, dict):
        raise click.UsageError(f"{where}: expected a table, found {_kind(table)}")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        from hpdsl.diagnostics import did_you_mean

        raise click.UsageError(f"{where}: unknown key '{unknown[0]}'; {did_you_mean(unknown[0], _KEYS)}")
    defaults: dict[str, dict[str, Any]] = {}
    if "paths" in table:
        paths = _paths(table["paths"], f"{where}: paths", path.parent, cwd)
        for command in PATH_COMMANDS:
            defaults.setdefault(command, {})["paths"] = paths
    if "import-paths" in table:
        defaults.setdefault("compile", {})["import_paths"] = _paths(
            table["import-paths"], f"{where}: import-paths", path.parent, cwd)
    if "strategy" in table:
        strategy = _strategy(table["strategy"], f"[tool.hpdsl.strategy] in {path}")
        for command in STRATEGY_COMMANDS:
            defaults.setdefault(command, {}).update(strategy)
    return defaults


def trusted(path: Path, table: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the table's trusted factory prefixes (docs/trust.md); a usage error if not a list of names."""
    prefixes = _strings(table.get("trusted", []), f"[tool.hpdsl] in {path}: trusted")
    bad = [p for p in prefixes if not all(part.isidentifier() for part in p.split("."))]
    if bad:
        raise click.UsageError(f"[tool.hpdsl] in {path}: trusted: '{bad[0]}' is not a dotted module prefix "
                               "such as 'my_pkg.layers'")
    return tuple(prefixes)


def apply(ctx: click.Context, cwd: Path) -> None:
    """Read the project's `[tool.hpdsl]` (if any) into `ctx.default_map` and HPDSL_TRUSTED."""
    found = find_config(cwd)
    if found is None:
        return
    path, table = found
    ctx.default_map = default_map(path, table, cwd)
    prefixes = trusted(path, table)
    if prefixes:
        given = [p for p in os.environ.get(TRUSTED_VARIABLE, "").split(",") if p.strip()]
        os.environ[TRUSTED_VARIABLE] = ",".join([*given, *prefixes])  # train's processes inherit it


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
             dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise click.UsageError(f"{where}: expected an array of strings, found {_kind(value)}"
                               + ("" if not isinstance(value, list) else " with other items"))
    return list(value)


def _paths(value: Any, where: str, base: Path, cwd: Path) -> list[str]:
    """Return the paths, relative to `base`, as the command line would give them from `cwd`."""
    shown = []
    for item in _strings(value, where):
        full = Path(os.path.normpath(base / item))
        try:
            shown.append(os.fspath(full.relative_to(cwd)) or ".")
        except ValueError:
            shown.append(os.fspath(full))
    return shown


def _strategy(value: Any, where: str) -> dict[str, Any]:
    """Return a strategy table as parameter names -> values, each checked against its flag's type."""
    from hpdsl.cli.options import ESTIMATE_FLAGS

    if not isinstance(value, dict):
        raise click.UsageError(f"{where}: expected a table, found {_kind(value)}")
    flags = {flag.split("/")[0].removeprefix("--"): (name, kind) for flag, name, kind, _ in ESTIMATE_FLAGS}
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in flags:
            from hpdsl.diagnostics import did_you_mean

            raise click.UsageError(f"{where}: unknown key '{key}'; {did_you_mean(key, flags)}")
        name, kind = flags[key]
        out[name] = _typed(item, kind, f"{where}: {key}")
    return out


def _typed(value: Any, kind: Any, where: str) -> Any:
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, str)
    if not ok:
        wanted = {bool: "a boolean", int: "an integer", float: "a number"}.get(kind, "a string")
        raise click.UsageError(f"{where}: expected {wanted}, found {_kind(value)} {value!r}")
    if isinstance(kind, click.Choice) and value.lower() not in [c.lower() for c in kind.choices]:
        listed = ", ".join(f"'{c}'" for c in kind.choices)
        raise click.UsageError(f"{where}: '{value}' is not one of {listed}")
    if isinstance(kind, click.ParamType) and not isinstance(kind, click.Choice):  # --device: a name or a file
        try:
            return kind.convert(value, None, None)
        except click.BadParameter as error:
            raise click.UsageError(f"{where}: {error.message}") from None
    return value
