"""`hpdsl estimate` and `hpdsl search`: a model and a strategy (or a device count) into prices."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import click

from hpdsl.cli.app import emit_json, json_option
from hpdsl.cli.budgets import budget_options, enforce, enforce_search, estimate_measured, pop_budgets
from hpdsl.cli.json_output import without_timings
from hpdsl.cli.models import load_cost_model
from hpdsl.cli.options import (ESTIMATE_FLAGS, SEARCH_FLAGS, cluster_option, flag_options, model_option,
                               no_stdlib_option, set_option, spec_paths)
from hpdsl.errors import InputError

if TYPE_CHECKING:  # the estimator needs numpy: imported when a command prices something
    from hpdsl.bound.bind import CostModel
    from hpdsl.cost.estimate import Estimate
    from hpdsl.cost.search import SearchResult


def with_cluster(flags: dict[str, Any]) -> dict[str, Any]:
    """Return `flags` with --cluster folded into the device key (hpdsl/cost/facts/machines.py); fail on an unknown one."""
    from hpdsl.cost.facts.devices import get_machine
    from hpdsl.cost.facts.machines import machine_key

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
@flag_options(ESTIMATE_FLAGS)
@cluster_option
@set_option
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path),
              help="Draw memory per pipeline stage as stacked bars into this PNG.")
@click.option("--as-trained", type=click.Choice(["cpu", "cuda"]),
              help="price the strategy as `hpdsl train --device cpu|cuda` runs it: its torch backend's run facts")
@budget_options()
@json_option
def estimate_command(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                     plot: Path | None, as_trained: str | None, as_json: bool, **flags: Any) -> None:
    """Count a model's parameters exactly and price one parallel strategy (memory, FLOPs, time).

    \b
    Examples:
      hpdsl estimate examples/llama3_8b.hpf --tp 8 --pp 2 --dp 4
      hpdsl estimate examples/mixtral_8x7b.hpf --dp 8 --ep 8 --tp 2 --sp --pp 2 --zero os --plot memory.png
      hpdsl estimate examples/llama3_8b.hpf --tp 8 --max-peak-gib 80 --max-step-seconds 30   # CI budgets
      hpdsl estimate examples/mixtral_8x7b.hpf --set layers=4 --set experts=4
      hpdsl estimate examples/llama3_8b.hpf --pp 2 --global-batch 4 --as-trained cpu   # as `hpdsl train` runs it
    """
    from hpdsl.cli.report import plot_memory, render_estimate
    from hpdsl.cost import parameters

    budgets = pop_budgets(flags)
    cost_model = load_cost_model(paths, model, stdlib=not no_stdlib, sets=sets)
    result = estimate_from_flags(cost_model, flags, as_trained)
    if plot is not None:
        plot_memory(result, plot)
    if as_json:
        emit_json(result.to_json())
    else:
        click.echo(render_params(cost_model.model.name, parameters(cost_model)))
        click.echo()
        click.echo(render_estimate(result))
        if plot is not None:
            click.echo(f"memory plot: {plot}")
    enforce(budgets, [estimate_measured(result)])


@click.command("search")
@spec_paths
@model_option
@no_stdlib_option
@flag_options(SEARCH_FLAGS, required=("devices",))
@cluster_option
@set_option
@click.option("--run", "run_best", is_flag=True,
              help="Train the fastest strategy `hpdsl train` runs, one gloo process per device (AdamW; fp32, or "
                   "bf16-mixed when --precision says so).")
@click.option("--steps", type=int, default=3, show_default=True, help="training steps of --run")
@click.option("--timings", is_flag=True, help="Put the search's wall-clock `seconds` in --json.")
@budget_options()
@json_option
def search_command(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                   run_best: bool, steps: int, timings: bool, as_json: bool, **flags: Any) -> None:
    """Price every valid strategy for N devices as arrays; rank those that fit by step time.

    \b
    Examples:
      hpdsl search examples/llama3_8b.hpf --devices 64
      hpdsl search examples/deepseek_v3.hpf --devices 2048 --top 5 --json
      hpdsl search examples/mixtral_8x7b.hpf --devices 4 --global-batch 4 --seq-len 32 --micro-batches 1 \\
          --set layers=2 --set hidden=64 --set vocab=128 --set experts=4 --run
    """
    from hpdsl.cli.report import render_search
    from hpdsl.cost.heap import keep_freed_memory

    budgets = pop_budgets(flags)
    cost_model = load_cost_model(paths, model, stdlib=not no_stdlib, sets=sets)
    shown = 10 if flags.get("top") is None else flags["top"]
    if run_best:
        flags = _runnable_flags(flags, shown)
    keep_freed_memory()  # the command's own process: a library caller decides for its process itself
    result = search_from_flags(cost_model, flags)
    if not run_best:
        if as_json:
            emit_json(without_timings(result.to_json(), timings=timings))
        else:
            click.echo(render_search(result))
        enforce_search(budgets, result, _total_params(cost_model))
        return
    from hpdsl.cli.train import render_train, run_training, runnable_reasons

    place, best = next(((i, e.strategy) for i, e in enumerate(result.top, 1) if not runnable_reasons(e.strategy)),
                       (len(result.top) + 1, None))
    # Why the faster ones were passed over, in ranking order, each reason once.
    skipped = list(dict.fromkeys(r for e in result.top[:place - 1] for r in runnable_reasons(e.strategy)))[:3]
    result = attrs.evolve(result, top=result.top[:shown], stands_for=result.stands_for[:shown])
    if best is None:
        refused = f"; it refuses: {'; '.join(skipped)}" if skipped else ""
        raise InputError(f"none of the {flags['top']} fastest strategies that fit runs on the torch backend"
                         + refused)
    name, trained = run_training(paths, model, no_stdlib, sets, best, nproc=flags["devices"], steps=steps)
    if as_json:
        emit_json({"search": without_timings(result.to_json(), timings=timings), "train": trained,
                   "trained": {"place": place, "strategy": attrs.asdict(best)}})
    else:
        click.echo(render_search(result))
        faster = "" if place == 1 else f" (the faster ones use what it refuses: {'; '.join(skipped)})"
        click.echo(f"\ntraining #{place} of the ranking, the fastest that `hpdsl train` runs{faster}")
        click.echo(render_train(name, best, trained))
    enforce_search(budgets, result, _total_params(cost_model))


def _total_params(cost_model: Any) -> int:
    from hpdsl.cost import parameters

    return int(parameters(cost_model).total)


def estimate_from_flags(cost_model: CostModel, flags: Mapping[str, Any], as_trained: str | None = None) -> Estimate:
    """Return the Estimate `hpdsl estimate` prints for its parsed flags (InvalidStrategyError with every reason).

    `as_trained` (cpu or cuda) prices the strategy as `hpdsl train` runs it on that device
    (hpdsl/cost/facts/backend.py: docs/cost-model.md#what-hpdsl-train-runs).
    """
    from hpdsl.cli.report import strategy_or_reasons
    from hpdsl.cost import estimate
    from hpdsl.cost.facts.backend import as_trained as trained

    strategy = strategy_or_reasons(with_cluster(dict(flags)), cost_model)
    if as_trained is not None:
        cost_model, strategy = trained(cost_model, strategy, as_trained)
    return estimate(cost_model, strategy)


def search_from_flags(cost_model: CostModel, flags: Mapping[str, Any]) -> SearchResult:
    """Return the SearchResult `hpdsl search` prints for its parsed flags: hpdsl.cost.search with them."""
    from hpdsl.cost import search

    devices, memory, options = search_inputs(flags)
    return search(cost_model, devices, memory, **options)


def search_inputs(flags: Mapping[str, Any]) -> tuple[int, float | None, dict[str, Any]]:
    """Return the device count, memory per device (bytes; None: the device's) and search keywords of the flags."""
    from hpdsl.cli.report import GIB, parse_ints, require_search_flags

    flags = with_cluster(dict(flags))
    options = {k: v for k, v in flags.items() if v is not None}
    devices, memory_gib = options.pop("devices"), options.pop("memory_gib", None)
    for key, flag in (("micro_batches", "--micro-batches"), ("vpp", "--vpp")):
        if key in options:
            options[key] = parse_ints(options[key], flag)
    require_search_flags(flags, {**options, "devices": devices})
    return devices, memory_gib * GIB if memory_gib is not None else None, options


def _runnable_flags(flags: Mapping[str, Any], shown: int) -> dict[str, Any]:
    """Return search flags restricted to what `hpdsl train` runs: AdamW, ZeRO-3 (none where dp·cp is 1), fp32 unless
    a precision the backend trains is asked (hpdsl/cost/facts/backend.py `KEPT`: fp32, bf16-mixed)."""
    from hpdsl.cost.facts.backend import KEPT

    out = dict(flags)
    if out.get("precision") is None:
        out["precision"] = "fp32"  # exact against one process (--validate)
    elif out["precision"] not in KEPT:
        raise InputError(f"--run trains precision {' or '.join(KEPT)} only, not {out['precision']}")
    if out.get("optimizer") is None:
        out["optimizer"] = "adam"
    elif out["optimizer"] != "adam":
        raise InputError(f"--run trains optimizer adam only, not {out['optimizer']}")
    # search's canonical ZeRO makes it none where idle; the fastest may be ones train refuses
    # (pp, etp, accumulation): 200 are ranked and the first it runs is trained.
    return {**out, "zero": ("os+grad+params",), "top": max(shown, 200)}


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
