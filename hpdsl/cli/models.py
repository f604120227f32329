"""`hpdsl stack`, `hpdsl import-hf`, `hpdsl estimate`: models into stacks, parameter counts and prices."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from hpdsl.cli.app import EXIT_OK, EXIT_SPEC, emit_json, json_option, main, report_diagnostics
from hpdsl.errors import InputError


def load_cost_model(paths: Sequence[Path], model: str | None, *, stdlib: bool) -> Any:
    """Compile `paths`, pick one model and bind it; exit 1 with the diagnostics on spec errors."""
    from hpdsl.api import compile_paths
    from hpdsl.check.scope import did_you_mean
    from hpdsl.cost import bind

    result = compile_paths(list(paths), stdlib=stdlib)
    if result.registry is None:
        report_diagnostics(result.diagnostics, result.sources)
        raise click.exceptions.Exit(EXIT_SPEC)
    models = result.registry.models
    if model is None:
        if len(models) != 1:
            names = ", ".join(sorted(models)) or "none"
            raise InputError(f"{len(models)} models are in scope ({names}); choose one with --model")
        model = next(iter(models))
    if model not in models:
        raise InputError(f"no model '{model}' in scope; {did_you_mean(model, models)}")
    spec = models[model]
    return bind(spec, result.registry.profiles[spec.profile])


spec_paths = click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
model_option = click.option("--model", "model", help="The model to use when the files declare several.")
no_stdlib_option = click.option("--no-stdlib", is_flag=True,
                                help="Leave the standard profiles and families out.")


@main.command("stack")
@spec_paths
@model_option
@no_stdlib_option
@json_option
def stack_command(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, as_json: bool) -> None:
    """Print a model's layer groups and, per kind, the fields it binds."""
    from hpdsl.cost.describe import describe_stack, render_stack

    cost_model = load_cost_model(paths, model, stdlib=not no_stdlib)
    if as_json:
        emit_json(describe_stack(cost_model))
    else:
        click.echo(render_stack(cost_model))


@main.command("import-hf")
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--name", help="The model's name (default: the config's folder name).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the .hpf here (atomically) instead of printing it.")
@json_option
@click.pass_context
def import_hf_command(ctx: click.Context, config: Path, name: str | None, output: Path | None,
                      as_json: bool) -> None:
    """Turn a HuggingFace config.json into a model .hpf."""
    from hpdsl.api import compile_sources, write_text_atomic
    from hpdsl.importers.hf import import_hf_file

    if not config.is_file():
        raise InputError(f"{config}: no such file")
    stdlib = compile_sources([], stdlib=True).unwrap()
    imported = import_hf_file(config, profiles=stdlib.profiles, name=name)
    for warning in imported.warnings:
        click.echo(f"hpdsl: warning: {warning}", err=True)
    if output is not None:
        write_text_atomic(output, imported.text)
    if as_json:
        emit_json({"ok": True, "model": imported.model.name.value, "profile": imported.profile,
                   "warnings": list(imported.warnings), "output": str(output) if output else None,
                   "text": imported.text})
    elif output is None:
        click.echo(imported.text, nl=False)
    else:
        click.echo(f"wrote {output}: model {imported.model.name.value} (profile {imported.profile})")
    ctx.exit(EXIT_OK)


@main.command("estimate")
@spec_paths
@model_option
@no_stdlib_option
@json_option
def estimate_command(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, as_json: bool) -> None:
    """Count a model's parameters exactly (total, active, MTP, per kind and per group)."""
    from hpdsl.cost import parameters

    cost_model = load_cost_model(paths, model, stdlib=not no_stdlib)
    report = parameters(cost_model)
    if as_json:
        emit_json({"model": cost_model.model.name, "profile": cost_model.model.profile,
                   "params": report.to_json()})
        return
    click.echo(render_params(cost_model.model.name, report))


def render_params(name: str, report: Any) -> str:
    """Return the readable parameter table of `hpdsl estimate`."""
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
