"""`hpdsl estimate` and `hpdsl search`: a model and a strategy (or a device count) into prices."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import click

from hpdsl.cli.app import emit_json, json_option
from hpdsl.cli.models import load_cost_model, model_option, no_stdlib_option, set_option, spec_paths
from hpdsl.cli.report import CLUSTER_HELP, ESTIMATE_FLAGS, SEARCH_FLAGS
from hpdsl.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])


def _flags(table: tuple[tuple[str, str, type, str], ...], *, required: tuple[str, ...] = ()
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


def cluster_option(command: F) -> F:
    """Declare `--cluster`: the device's cluster, folded into the strategy's machine key."""
    return click.option("--cluster", "cluster", default=None, help=CLUSTER_HELP)(command)


def with_cluster(flags: dict[str, Any]) -> dict[str, Any]:
    """Return `flags` with --cluster folded into the device key (hpdsl/cost/time/devices.py); fail on an unknown one."""
    from hpdsl.cost.devices import get_machine
    from hpdsl.cost.time.devices import machine_key

    cluster = flags.pop("cluster", None)
    if cluster is None:
        return flags
    key = machine_key(flags.get("device"), cluster)
    get_machine(key)  # a usage error naming the choices, before any pricing
    return {**flags, "device": key}


@click.command("estimate")
@spec_paths
@model_option
@no_stdlib_option
@_flags(ESTIMATE_FLAGS)
@cluster_option
@set_option
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path),
              help="Draw memory per pipeline stage as stacked bars into this PNG.")
@json_option
def estimate_command(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                     plot: Path | None, as_json: bool, **flags: Any) -> None:
    """Count a model's parameters exactly and price one parallel strategy (memory, FLOPs, time).

    \b
    Examples:
      hpdsl estimate examples/llama3_8b.hpf --tp 8 --pp 2 --dp 4
      hpdsl estimate examples/mixtral_8x7b.hpf --ep 8 --tp 2 --plot memory.png
      hpdsl estimate examples/mixtral_8x7b.hpf --set layers=4 --set experts=4
    """
    from hpdsl.cost import parameters
    from hpdsl.cost.estimate import estimate
    from hpdsl.cli.report import plot_memory, render_estimate, strategy_or_reasons

    flags = with_cluster(flags)
    cost_model = load_cost_model(paths, model, stdlib=not no_stdlib, sets=sets)
    result = estimate(cost_model, strategy_or_reasons(flags, cost_model))
    if plot is not None:
        plot_memory(result, plot)
    if as_json:
        emit_json(result.to_json())
        return
    click.echo(render_params(cost_model.model.name, parameters(cost_model)))
    click.echo()
    click.echo(render_estimate(result))
    if plot is not None:
        click.echo(f"memory plot: {plot}")


@click.command("search")
@spec_paths
@model_option
@no_stdlib_option
@_flags(SEARCH_FLAGS, required=("devices",))
@cluster_option
@set_option
@click.option("--run", "run_best", is_flag=True,
              help="Train the fastest strategy `hpdsl train` runs, one gloo process per device (fp32, AdamW).")
@click.option("--steps", type=int, default=3, show_default=True, help="training steps of --run")
@json_option
def search_command(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                   run_best: bool, steps: int, as_json: bool, **flags: Any) -> None:
    """Price every valid strategy for N devices as arrays; rank those that fit by step time.

    \b
    Examples:
      hpdsl search examples/llama3_8b.hpf --devices 64
      hpdsl search examples/deepseek_v3.hpf --devices 2048 --top 5 --json
      hpdsl search examples/mixtral_8x7b.hpf --devices 4 --global-batch 4 --seq-len 32 --micro-batches 1 \\
          --set layers=2 --set hidden=64 --set vocab=128 --set experts=4 --run
    """
    from hpdsl.cli.report import GIB, parse_ints, render_search, require_search_flags
    from hpdsl.cost.heap import keep_freed_memory
    from hpdsl.cost.search import search

    flags = with_cluster(flags)
    cost_model = load_cost_model(paths, model, stdlib=not no_stdlib, sets=sets)
    options = {k: v for k, v in flags.items() if v is not None}
    if run_best:
        options = _runnable_options(options)
    devices, memory_gib = options.pop("devices"), options.pop("memory_gib", None)
    for key, flag in (("micro_batches", "--micro-batches"), ("vpp", "--vpp")):
        if key in options:
            options[key] = parse_ints(options[key], flag)
    require_search_flags(flags, {**options, "devices": devices})
    memory = memory_gib * GIB if memory_gib is not None else None
    shown = options.get("top", 10)
    if run_best:
        options["top"] = max(shown, 200)  # the fastest may be ones train refuses (pp, etp, accumulation)
    keep_freed_memory()  # the command's own process: a library caller decides for its process itself
    result = search(cost_model, devices, memory, **options)
    if not run_best:
        if as_json:
            emit_json(result.to_json())
        else:
            click.echo(render_search(result))
        return
    from hpdsl.cli.train import render_train, run_training, runnable_reasons

    place, best = next(((i, e.strategy) for i, e in enumerate(result.top, 1) if not runnable_reasons(e.strategy)),
                       (len(result.top) + 1, None))
    # Why the faster ones were passed over, in ranking order, each reason once.
    skipped = list(dict.fromkeys(r for e in result.top[:place - 1] for r in runnable_reasons(e.strategy)))[:3]
    result = attrs.evolve(result, top=result.top[:shown], stands_for=result.stands_for[:shown])
    if best is None:
        refused = f"; it refuses: {'; '.join(skipped)}" if skipped else ""
        raise InputError(f"none of the {options['top']} fastest strategies that fit runs on the torch backend"
                         + refused)
    name, trained = run_training(paths, model, no_stdlib, sets, best, nproc=devices, steps=steps)
    if as_json:
        emit_json({"search": result.to_json(), "train": trained,
                   "trained": {"place": place, "strategy": attrs.asdict(best)}})
    else:
        click.echo(render_search(result))
        faster = "" if place == 1 else f" (the faster ones use what it refuses: {'; '.join(skipped)})"
        click.echo(f"\ntraining #{place} of the ranking, the fastest that `hpdsl train` runs{faster}")
        click.echo(render_train(name, best, trained))


def run_estimate(cost_model: Any, flags: dict[str, Any]) -> Any:
    """Return the Estimate `hpdsl estimate` prints for its parsed flags (InvalidStrategyError with every reason)."""
    from hpdsl.cost.estimate import estimate
    from hpdsl.cli.report import strategy_or_reasons

    return estimate(cost_model, strategy_or_reasons(with_cluster(dict(flags)), cost_model))


def run_search(cost_model: Any, flags: dict[str, Any]) -> Any:
    """Return the SearchResult `hpdsl search` prints for its parsed flags, without --run (bench/fuzz.py)."""
    from hpdsl.cli.report import GIB, parse_ints, require_search_flags
    from hpdsl.cost.search import search

    flags = with_cluster(dict(flags))
    options = {k: v for k, v in flags.items() if v is not None}
    devices, memory_gib = options.pop("devices"), options.pop("memory_gib", None)
    for key, flag in (("micro_batches", "--micro-batches"), ("vpp", "--vpp")):
        if key in options:
            options[key] = parse_ints(options[key], flag)
    require_search_flags(flags, {**options, "devices": devices})
    memory = memory_gib * GIB if memory_gib is not None else None
    return search(cost_model, devices, memory, **options)


def _runnable_options(options: dict[str, Any]) -> dict[str, Any]:
    """Return search options restricted to what `hpdsl train` runs: fp32 AdamW, ZeRO-3 (none where dp·cp is 1)."""
    for key, value in (("precision", "fp32"), ("optimizer", "adam")):
        if options.setdefault(key, value) != value:
            raise InputError(f"--run trains {key} {value} only, not {options[key]}")
    return {**options, "zero": ("os+grad+params",)}  # search's canonical ZeRO makes it none where idle


def render_params(name: str, report: Any) -> str:
    """Return the readable parameter table: totals, then per kind (per layer and in all)."""
    rows = [("total", report.total), ("active per token", report.active),
            ("embedding", report.embedding), ("output head", report.output),
            ("body", report.body), ("MTP (not in total)", report.mtp)]
    lines = [f"parameters of {name}"]
    lines += [f"  {label:<20} {value:>18,}  ({value / 1e9:,.2f} B)" for label, value in rows]
    by_kind: dict[tuple[str | None, bool], list[Any]] = {}
    for group in report.groups:
        by_kind.setdefault((group.kind, group.mtp), []).append(group)
    for (kind, mtp), groups in by_kind.items():
        layers = sum(g.count for g in groups)
        label = f"{kind or '-'} x {layers}" + (" (MTP)" if mtp else "")
        lines.append(f"  {label:<26} {groups[0].per_layer:>16,} per layer "
                     f"{sum(g.total for g in groups):>18,} in all")
    return "\n".join(lines)
