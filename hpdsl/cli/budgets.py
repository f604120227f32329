"""Budgets for CI: `--max-params`, `--max-peak-gib`, `--max-step-seconds` on estimate, search and diff.

A command prints its result as usual (text or JSON), then checks what it measured
against the budgets given; each one exceeded is a line `hpdsl: over budget: ...`
on stderr naming the flag, the limit and the value, and the command exits 1
(docs/ci.md). A budget on something the command did not measure (peak memory
of a diff without strategy flags) is a usage error, exit 2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs
import click

from hpdsl.cli.app import EXIT_SPEC

F = TypeVar("F", bound=Callable[..., Any])

GIB = 1024**3

_FLAGS: tuple[tuple[str, str, click.ParamType, str], ...] = (
    ("--max-params", "max_params", click.IntRange(min=0),
     "exit 1 if the model has more parameters than this (total, without MTP)"),
    ("--max-peak-gib", "max_peak_gib", click.FloatRange(min=0),
     "exit 1 if the peak memory per device is above this many GiB"),
    ("--max-step-seconds", "max_step_seconds", click.FloatRange(min=0),
     "exit 1 if the step time is above this many seconds"),
)
NAMES = tuple(name for _, name, _, _ in _FLAGS)
_FLAG = {name: flag for flag, name, _, _ in _FLAGS}


@attrs.frozen
class Budgets:
    """The budgets a command was given (None: no budget)."""

    max_params: int | None = None
    max_peak_gib: float | None = None
    max_step_seconds: float | None = None

    @property
    def given(self) -> bool:
        """Return whether any budget was given."""
        return any(getattr(self, name) is not None for name in NAMES)


@attrs.frozen
class Measured:
    """What one priced thing measured against the budgets (None: not measured)."""

    what: str
    params: int | None = None
    peak_bytes: float | None = None
    step_seconds: float | None = None


def budget_options(*, step: bool = True) -> Callable[[F], F]:
    """Add the budget flags (`--max-step-seconds` only where `step`) to a command."""
    def decorate(command: F) -> F:
        for flag, name, kind, text in reversed(_FLAGS):
            if step or name != "max_step_seconds":
                command = click.option(flag, name, type=kind, default=None, help=text)(command)
        return command
    return decorate


def pop_budgets(flags: dict[str, Any]) -> Budgets:
    """Remove the budget flags from a command's keyword arguments and return them."""
    return Budgets(**{name: flags.pop(name) for name in NAMES if name in flags})


def overruns(budgets: Budgets, measured: Iterable[Measured]) -> list[str]:
    """Return one line per budget a measured thing exceeds (empty: all within budget)."""
    lines: list[str] = []
    for m in measured:
        checks = (("max_params", m.params, 1, "{:,.0f} parameters"),
                  ("max_peak_gib", m.peak_bytes, GIB, "{:,.2f} GiB peak memory per device"),
                  ("max_step_seconds", m.step_seconds, 1, "{:,.3f} s per step"))
        for name, value, unit, shown in checks:
            limit = getattr(budgets, name)
            if limit is not None and value is not None and value / unit > limit:
                stated = f"{limit:,}" if isinstance(limit, int) else f"{limit:g}"
                lines.append(f"{_FLAG[name]} {stated}: {m.what} has {shown.format(value / unit)}")
    return lines


def require_measured(budgets: Budgets, unmeasured: Mapping[str, str]) -> None:
    """Raise a usage error if a budget is given on something not measured (`unmeasured`: name -> why)."""
    for name, why in unmeasured.items():
        if getattr(budgets, name) is not None:
            raise click.UsageError(f"{_FLAG[name]} needs {why}")


def enforce(budgets: Budgets, measured: Iterable[Measured]) -> None:
    """Exit 1 after printing each exceeded budget to stderr; return if all hold."""
    if not budgets.given:
        return
    lines = overruns(budgets, measured)
    for line in lines:
        click.echo(f"hpdsl: over budget: {line}", err=True)
    if lines:
        click.get_current_context().exit(EXIT_SPEC)


def estimate_measured(estimate: Any, what: str | None = None) -> Measured:
    """Return what an Estimate measured: total parameters, peak bytes per device, step seconds."""
    return Measured(what or f"model {estimate.model}", int(estimate.params.total),
                    estimate.memory.peak_bytes, estimate.step_time_s)


def enforce_search(budgets: Budgets, result: Any, params: int) -> None:
    """Exit 1 if the search's fastest strategy (or the model) exceeds a budget, or nothing fits to check."""
    if not budgets.given:
        return
    if not result.top and (budgets.max_peak_gib is not None or budgets.max_step_seconds is not None):
        named = " and ".join(_FLAG[n] for n in ("max_peak_gib", "max_step_seconds") if getattr(budgets, n) is not None)
        click.echo(f"hpdsl: over budget: {named}: no strategy fits {result.devices} devices", err=True)
        click.get_current_context().exit(EXIT_SPEC)
    measured = [Measured(f"model {result.model}", params)]
    if result.top:
        best = result.top[0]
        measured.append(Measured(f"the fastest strategy ({_strategy(best.strategy)})",
                                 peak_bytes=best.memory.peak_bytes, step_seconds=best.step_time_s))
    enforce(budgets, measured)


def _strategy(strategy: Any) -> str:
    from hpdsl.cli.report import describe_strategy

    return describe_strategy(strategy)
