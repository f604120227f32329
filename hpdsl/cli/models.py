"""`hpdsl stack` and `hpdsl import-hf`: models into layer stacks, and HF configs into models."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from hpdsl.cli.app import EXIT_OK, emit_json, json_option
from hpdsl.cli.options import model_option, no_stdlib_option, spec_paths
from hpdsl.errors import InputError


def load_cost_model(paths: Sequence[Path], model: str | None, *, stdlib: bool, sets: Sequence[str] = ()) -> Any:
    """Compile `paths`, pick one model, apply `--set` overrides and bind it (diagnostics exit 1)."""
    from hpdsl.api import bind_model

    return bind_model(paths, model, stdlib=stdlib, pairs=sets)


@click.command("stack")
@spec_paths
@model_option
@no_stdlib_option
@json_option
def stack_command(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, as_json: bool) -> None:
    """Print a model's layer groups and, per kind, the fields it binds.

    \b
    Examples:
      hpdsl stack examples/qwen3_next_80b_a3b.hpf
      hpdsl stack examples/deepseek_v3.hpf --json
    """
    from hpdsl.cli.describe import describe_stack, render_stack

    cost_model = load_cost_model(paths, model, stdlib=not no_stdlib)
    if as_json:
        emit_json(describe_stack(cost_model))
    else:
        click.echo(render_stack(cost_model))


@click.command("import-hf")
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--name", help="The model's name (default: the config's folder name).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the .hpf here (atomically) instead of printing it.")
@click.option("--profiles", "profile_paths", multiple=True, type=click.Path(path_type=Path),
              help="A .hpf file or folder of your own profiles to import against (repeatable).")
@click.option("--profile", help="Price the model with this profile, whatever its model_type.")
@click.option("--allow-unknown", is_flag=True,
              help="Import a config with keys hpdsl does not understand (each is warned about; "
                   "the count may be wrong).")
@json_option
@click.pass_context
def import_hf_command(ctx: click.Context, config: Path, name: str | None, output: str | None,
                      profile_paths: tuple[Path, ...], profile: str | None, allow_unknown: bool,
                      as_json: bool) -> None:
    """Turn a HuggingFace config.json into a model .hpf.

    \b
    Examples:
      hpdsl import-hf config.json                  # a model's HuggingFace config.json
      hpdsl import-hf config.json --name my_model -o my_model.hpf
      hpdsl import-hf config.json --profile llama2 --json
    """
    from hpdsl.api import compile_paths, compile_sources, output_target, write_text_atomic
    from hpdsl.files import reason
    from hpdsl.importers.hf import check_imported, import_hf_file

    try:
        config.stat()
    except FileNotFoundError:
        raise InputError(f"{config}: no such file") from None
    except OSError as exc:  # a name too long, a symlink loop
        raise InputError(f"{str(config)[:200]}: {reason(exc)}") from None
    if not config.is_file():
        raise InputError(f"{config}: {'a folder' if config.is_dir() else 'not a regular file'}, not a config.json")
    registry = compile_paths(list(profile_paths), stdlib=True) if profile_paths else \
        compile_sources([], stdlib=True)
    imported = import_hf_file(config, profiles=registry.profiles, name=name, profile=profile,
                              allow_unknown=allow_unknown)
    check_imported(imported, profile_paths)
    for warning in imported.warnings:
        click.echo(f"hpdsl: warning: {warning}", err=True)
    if output is not None:
        write_text_atomic(output_target(output, [config]), imported.text)
    if as_json:
        emit_json({"ok": True, "model": imported.model.name.value, "profile": imported.profile,
                   "warnings": list(imported.warnings), "composite": imported.composite,
                   "output": str(output) if output else None,
                   "text": imported.text})
    elif output is None:
        click.echo(imported.text, nl=False)
    else:
        click.echo(f"wrote {output}: model {imported.model.name.value} (profile {imported.profile})")
    ctx.exit(EXIT_OK)
