"""`hpdsl diff A B`: what changes, per model, between two specs or registries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hpdsl.cli.app import EXIT_SPEC, emit_json, json_option
from hpdsl.cli.budgets import Measured, budget_options, enforce, pop_budgets, require_measured
from hpdsl.cli.options import ESTIMATE_FLAGS
from hpdsl.cli.report import GIB

# The strategy flags that change peak memory; `hpdsl estimate` documents each.
_STRATEGY_FLAGS = tuple(row for row in ESTIMATE_FLAGS if row[1] not in ("mfu", "num_devices"))


def _strategy_options(command: Any) -> Any:
    for flag, name, kind, text in reversed(_STRATEGY_FLAGS):
        if kind is bool:
            command = click.option(flag, name, default=None, help=text)(command)
        else:
            command = click.option(flag, name, type=kind, default=None, help=text)(command)
    return command


@click.command("diff")
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@click.option("--model", "model", help="Compare only this model.")
@click.option("--no-stdlib", is_flag=True, help="Leave the standard profiles and families out.")
@_strategy_options
@click.option("--exit-code", "exit_code", is_flag=True,
              help="Exit 1 if the two sides differ, 0 if they are the same (as `git diff --exit-code`).")
@budget_options(step=False)
@json_option
@click.pass_context
def diff_command(ctx: click.Context, a: Path, b: Path, model: str | None, no_stdlib: bool, exit_code: bool,
                 as_json: bool, **flags: Any) -> None:
    """Compare two specs (.hpf files or folders) or registry.json files, model by model.

    Reports layer groups, exact parameters (total and active) and forward FLOPs per
    token; with strategy flags (--tp, --pp, ...) also peak memory per pipeline stage.

    \b
    Examples:
      hpdsl diff examples/llama2_7b.hpf examples/llama3_8b.hpf
      hpdsl compile examples/ -o registry.json && hpdsl diff registry.json examples/ --pp 2 --tp 2 --sp --json
      hpdsl diff registry.json examples/ --exit-code                 # exit 1 if the specs changed
      hpdsl diff registry.json examples/ --model llama3_8b --max-params 9000000000
    """
    from hpdsl.cli.report import strategy_from_flags
    from hpdsl.cost.diff import diff_registries

    budgets = pop_budgets(flags)
    given = {k: v for k, v in flags.items() if v is not None}
    require_measured(budgets, {} if given else {"max_peak_gib": "strategy flags (--tp, --pp, ...) to price memory"})
    left, right = _load(a, stdlib=not no_stdlib), _load(b, stdlib=not no_stdlib)
    if model is not None:
        left, right = _only(left, model), _only(right, model)
    strategy = strategy_from_flags(given) if given else None
    result = diff_registries(left, right, strategy)
    if as_json:
        emit_json({"a": str(a), "b": str(b), **result})
    else:
        click.echo(render_diff(str(a), str(b), result))
    if budgets.given:
        enforce(budgets, _measured(right, result, strategy, str(b)))
    if exit_code and differs(result):
        ctx.exit(EXIT_SPEC)


def differs(result: dict[str, Any]) -> bool:
    """Return whether a diff found anything: a model added, removed or changed."""
    return bool(result["added"] or result["removed"] or any(m["changed"] for m in result["models"].values()))


def _measured(right: Any, result: dict[str, Any], strategy: Any, side: str) -> list[Measured]:
    """Return what each model of the new side (`b`) measured, for its budgets."""
    from hpdsl.cost.diff import summarize

    sides = {name: m["b"] for name, m in result["models"].items()}
    sides.update({name: summarize(right, name, strategy).to_json() for name in result["added"]})
    return [Measured(f"model {name} of {side}", s["params"]["total"],
                     None if s["peak_memory_per_stage"] is None else max(s["peak_memory_per_stage"], default=0))
            for name, s in sides.items()]


def _load(path: Path, *, stdlib: bool) -> Any:
    from hpdsl.api import compile_paths
    from hpdsl.registry import load_registry

    if path.is_file() and path.suffix == ".json":
        return load_registry(path)
    return compile_paths([path], stdlib=stdlib)


def _only(registry: Any, name: str) -> Any:
    """Return the registry with only model `name` (InputError if it lacks it)."""
    import attrs

    from hpdsl.errors import InputError
    from hpdsl.registry import Registry

    if name not in registry.models:
        raise InputError(f"no model '{name}' in one of the two sides")
    return Registry(attrs.evolve(registry.ir, models={name: registry.models[name]}))


def render_diff(a: str, b: str, result: dict[str, Any]) -> str:
    """Return the readable diff: added and removed models, then each common model's changes."""
    lines = [f"--- {a}", f"+++ {b}"]
    lines += [f"model {name}: only in {b}" for name in result["added"]]
    lines += [f"model {name}: only in {a}" for name in result["removed"]]
    unchanged = [name for name, m in result["models"].items() if not m["changed"]]
    for name, m in result["models"].items():
        if m["changed"]:
            lines += _model_lines(name, m)
    if unchanged:
        lines.append(f"unchanged: {', '.join(unchanged)}")
    return "\n".join(lines)


def _model_lines(name: str, m: dict[str, Any]) -> list[str]:
    left, right, delta = m["a"], m["b"], m["delta"]
    lines = [f"model {name}:"]
    if left["profile"] != right["profile"]:
        lines.append(f"  profile      {left['profile']} -> {right['profile']}")
    if left["groups"] != right["groups"]:
        lines.append(f"  layers       {left['layers']} -> {right['layers']}")
        lines.append(f"  groups       {_groups(left['groups'])} -> {_groups(right['groups'])}")
    for key in ("total", "active"):
        old, new = left["params"][key], right["params"][key]
        lines.append(f"  params {key:<6}{old:>18,} -> {new:>18,}  ({delta[key]:+,}{_pct(old, new)})")
    old, new = left["flops_per_token"], right["flops_per_token"]
    lines.append(f"  FLOPs/token  {old / 1e9:>17,.3f}G -> {new / 1e9:>17,.3f}G  "
                 f"({(new - old) / 1e9:+,.3f}G{_pct(old, new)})")
    if left["peak_memory_per_stage"] is not None:
        lines.append("  peak GiB per stage:")
        pairs = zip(left["peak_memory_per_stage"], right["peak_memory_per_stage"])
        lines += [f"    stage {i:<4} {x / GIB:>10,.2f} -> {y / GIB:>10,.2f}  ({(y - x) / GIB:+,.2f})"
                  for i, (x, y) in enumerate(pairs)]
    return lines


def _groups(groups: list[dict[str, Any]]) -> str:
    return ", ".join(f"{g['kind'] or '-'} x {g['count']}" + (" MTP" if g["mtp"] else "")
                     for g in groups)


def _pct(old: float, new: float) -> str:
    return f", {100 * (new - old) / old:+.2f}%" if old else ""
