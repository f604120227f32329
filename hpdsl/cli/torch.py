"""`hpdsl explain`: a module path of a built model into the family, variant, rule and mesh behind it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hpdsl.cli.app import emit_json, json_option
from hpdsl.cli.options import model_option, no_stdlib_option
from hpdsl.errors import InputError
from hpdsl.model.axes import AxisSizes


def _selector(text: str) -> tuple[str, str, Any]:
    """Parse `role.selector=value` (value: true/false, an integer, or a name)."""
    target, sep, raw = text.partition("=")
    role, dot, name = target.partition(".")
    if not (sep and dot and role and name):
        raise click.BadParameter(f"{text!r}: expected ROLE.SELECTOR=VALUE, e.g. experts.use_mxfp8=true")
    value: Any = {"true": True, "false": False}.get(raw, raw)
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    return role, name, value


@click.command("explain")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--path", "module_path", required=True,
              help="The module path in the built model, e.g. layers.17.mixer.")
@model_option
@click.option("--tp", default=1, show_default=True, help="Tensor-parallel size.")
@click.option("--cp", default=1, show_default=True, help="Context-parallel size.")
@click.option("--ep", default=1, show_default=True, help="Expert-parallel size.")
@click.option("--set", "settings", multiple=True, metavar="ROLE.SELECTOR=VALUE",
              help="An explicit selector, by slot role, e.g. --set experts.use_mxfp8=true (repeatable).")
@no_stdlib_option
@json_option
def explain_command(paths: tuple[Path, ...], module_path: str, model: str | None, tp: int, cp: int,
                    ep: int, settings: tuple[str, ...], no_stdlib: bool, as_json: bool) -> None:
    """Say which family, variant, selector clause and mesh sizes built a module, and where they are declared.

    \b
    Examples:
      hpdsl explain examples/deepseek_v3.hpf --path layers.5.ffn.experts --ep 8
    """
    try:
        from hpdsl.torch import build_model, explain_module
        from hpdsl.torch.fake import fake_job
    except ImportError:
        raise InputError("hpdsl explain builds the model with torch: pip install 'hpdsl[torch]'") from None
    from hpdsl.cli.models import load_cost_model

    cost = load_cost_model(paths, model, stdlib=not no_stdlib)
    registry = _registry(paths, stdlib=not no_stdlib)
    selectors: dict[str, dict[str, Any]] = {}
    for role, name, value in map(_selector, settings):
        selectors.setdefault(role, {})[name] = value
    with fake_job(AxisSizes(tp=tp, cp=cp, ep=ep)) as mesh:
        built = build_model(cost.model, mesh, registry=registry, device="meta", selectors=selectors)
        story = explain_module(built, module_path)
    if as_json:
        emit_json(story)
    else:
        click.echo(render_story(story))


def _registry(paths: tuple[Path, ...], *, stdlib: bool) -> Any:
    from hpdsl.api import compile_paths

    return compile_paths(list(paths), stdlib=stdlib)


def render_story(story: dict[str, Any]) -> str:
    """Return the readable form of an explain result."""
    if story.get("family") is None:
        inside = ", ".join(story.get("families_inside", [])) or "none"
        return f"{story['path']}: {story['module']} is built by no family; families inside: {inside}"
    where = story["declared_at"]
    mesh = "  ".join(f"{axis}={size}" for axis, size in story["mesh"].items())
    selectors = "  ".join(f"{k}={_text(v)}" + ("" if k in story["explicit_selectors"] else " (default)")
                          for k, v in story["selectors"].items()) or "none"
    lines = [f"{story['path']}: family {story['family']}, variant {story['variant']} ({story['class']})",
             f"  chosen by   {story['clause']}   [{where['variant']}]",
             f"  selectors   {selectors}",
             f"  mesh        {mesh}" + (f"  (parallel on {story['parallel_axis']})"
                                        if story["parallel"] else ""),
             f"  family      declared at {where['family']}"]
    if story["family_path"] != story["path"]:
        lines.insert(1, f"  inside      {story['family_path']}")
    for require in where["requires"]:
        lines.append(f"  require     {require['message']}   [{require['at']}]")
    return "\n".join(lines)


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
