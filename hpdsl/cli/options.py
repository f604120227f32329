"""The CLI's shared options and flag tables: the strategy and search flags, the model paths, --model, --set.

Every command that reads a strategy or a model declares its options from here, so
`hpdsl estimate`, `hpdsl search`, `hpdsl train` and `hpdsl diff` spell them once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import click

from hpdsl.model.strategy import CLUSTER_HELP, DEVICE_ALIASES, DEVICE_NAMES, flag_fields

FlagTable = tuple[tuple[str, str, Any, str], ...]
"""Rows of (flag, keyword, type or click.Choice, help)."""

_FLAG_TYPES = {"bool": bool, "tristate": bool, "float": float, "int": int}
"""A Strategy field's flag type by its grid encoding (the rest are names: str)."""


_CHOICES = ("recompute", "zero")
"""Fields whose flag lists its values in --help and completion (a wrong one is a usage error, exit 2);
the other named fields are checked with the rest of the strategy, so every reason is said at once."""



class DeviceType(click.ParamType):
    """A shipped device's name (case-insensitive; listed in --help, completed, named on error) or a .hpf file."""

    name = "device"

    def __init__(self, names: tuple[str, ...], aliases: tuple[str, ...] = ()) -> None:
        self.choices = names
        self.aliases = aliases

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        """Return the choices as --help shows them: `[a|b|...|FILE.hpf]`."""
        return "[" + "|".join((*self.choices, *self.aliases)) + "|FILE.hpf]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Return a shipped name in lower case, or a path ending in .hpf as given; fail listing the choices."""
        if not isinstance(value, str):
            return value
        if value.lower() in (*self.choices, *self.aliases):
            return value.lower()
        if value.endswith(".hpf") or "@" in value or Path(value).is_file():  # the catalog reads a file or key
            return value
        listed = ", ".join(repr(name) for name in (*self.choices, *self.aliases))
        self.fail(f"{value!r} is not one of {listed}, nor a .hpf file declaring a device", param, ctx)

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        """Return the shipped names starting with `incomplete` (a path when none does)."""
        from click.shell_completion import CompletionItem

        names = [n for n in (*self.choices, *self.aliases) if n.startswith(incomplete.lower())]
        return [CompletionItem(n) for n in names] or [CompletionItem(incomplete, type="file")]


DEVICES = DeviceType(DEVICE_NAMES, DEVICE_ALIASES)


def strategy_flag(field: attrs.Attribute) -> tuple[str, str, Any, str]:
    """Return the flag-table row of a Strategy field (its `flag`, `help` and `choices` metadata)."""
    kind: Any = _FLAG_TYPES.get(field.metadata["encode"], str)
    if field.name in _CHOICES:
        kind = click.Choice(field.metadata["choices"])
    elif field.name == "device":
        kind = DEVICES
    return (field.metadata["flag"], field.name, kind, field.metadata["help"])


ESTIMATE_FLAGS: FlagTable = tuple(strategy_flag(field) for field in flag_fields())
"""`hpdsl estimate` flags: (flag, Strategy field, type, help), derived from Strategy's declaration
(hpdsl/model/strategy.py). Unset flags keep Strategy's defaults."""

_BY_NAME = {row[1]: row for row in ESTIMATE_FLAGS}

SEARCH_FLAGS: FlagTable = (
    ("--devices", "devices", int, "devices to use (required)"),
    ("--memory-gib", "memory_gib", float, "memory per device in GiB (default: the device's)"),
    ("--top", "top", int, "strategies to show (default 10)"),
    _BY_NAME["device"],
    ("--global-batch", "global_batch", int, "sequences per step (default 1024)"),
    ("--seq-len", "seq_len", int, "sequence length (default 4096)"),
    ("--micro-batches", "micro_batches", str, "micro-batch sizes to try, comma-separated (1,2,4,8)"),
    ("--vpp", "vpp", str, "virtual stages to try, comma-separated (1)"),
    _BY_NAME["precision"],
    _BY_NAME["optimizer"],
    _BY_NAME["impl"],
    ("--softmax-bytes", "softmax_bytes", int, "bytes per saved softmax element without flash (default 2)"),
    _BY_NAME["mfu"],
    ("--pareto/--no-pareto", "pareto", bool, "print the memory/step-time frontier instead of the fastest"),
)
"""`hpdsl search` flags: (flag, search_command keyword, type, help)."""


cluster_option = click.option("--cluster", "cluster", default=None, help=CLUSTER_HELP)
"""`--cluster`: the device's cluster, folded into the strategy's machine key (hpdsl/cli/cost.py's with_cluster)."""

set_option = click.option("--set", "sets", multiple=True, metavar="FIELD=VALUE",
                          help="Override a model field (block fields by name: --set experts=4); repeatable.")


spec_paths = click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
model_option = click.option("--model", "model", help="The model to use when the files declare several.")
no_stdlib_option = click.option("--no-stdlib", is_flag=True,
                                help="Leave the standard profiles and families out.")


F = TypeVar("F", bound=Callable[..., Any])


def flag_options(table: FlagTable, *, required: tuple[str, ...] = ()
           ) -> Callable[[F], F]:
    """Declare one click option per row of a flag table (unset flags arrive as None)."""
    def decorate(command: F) -> F:
        for flag, name, kind, text in reversed(table):
            if kind is bool:
                command = click.option(flag, name, default=None, help=text)(command)
            elif name in required:  # no default at all: click 8.5 skips the check for default=None
                command = click.option(flag, name, type=kind, required=True, help=text)(command)
            else:
                command = click.option(flag, name, type=kind, default=None, help=text)(command)
        return command
    return decorate
