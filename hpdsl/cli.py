"""Command lines into pipeline calls, and their outcomes into text, JSON and exit codes.

Every command is one function under the `main` group. The group maps errors to
exit codes in one place (`_Group.invoke`), so a command only reports what it
found and says whether it succeeded: spec diagnostics exit 1, usage and I/O
errors 2, anything else is a bug in hpdsl and exits 3 with a one-line report
(the traceback only with HPDSL_DEBUG=1). Commands import the pipeline when they
run, so `hpdsl --help` stays fast and a new command costs the others nothing.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import attrs
import click

from hpdsl.diagnostics import Diagnostic, Source, render_diagnostics
from hpdsl.errors import HpdslError, InputError, LoadError, SpecError

EXIT_OK = 0
EXIT_SPEC = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3

# Error classes whose exit code is not EXIT_SPEC (the code of every other HpdslError).
_USAGE_ERRORS: tuple[type[HpdslError], ...] = (InputError, LoadError)

DEBUG_VARIABLE = "HPDSL_DEBUG"
_JSON_KEY = "hpdsl.json"

F = TypeVar("F", bound=Callable[..., Any])


# --------------------------------------------------------------------------
# The group: one place for errors and exit codes
# --------------------------------------------------------------------------


def exit_code(error: BaseException) -> int:
    """Return the exit code an error ends the command with."""
    if isinstance(error, _USAGE_ERRORS):
        return EXIT_USAGE
    if isinstance(error, HpdslError):
        return EXIT_SPEC
    return EXIT_INTERNAL


class _Group(click.Group):
    """The hpdsl command group: turns every escaping error into its report and exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise  # click's own: usage errors (exit 2) and explicit exits
        except BrokenPipeError:
            # The reader went away (`hpdsl fmt ... | head`): not a bug; silence the
            # interpreter's own complaint when it flushes stdout at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(EXIT_USAGE)
        except Exception as error:  # noqa: BLE001 - this is the one place errors end
            _fail(ctx, error)


def _fail(ctx: click.Context, error: Exception) -> NoReturn:
    code = exit_code(error)
    message, details = _explain(error, code)
    diagnostics = error.diagnostics if isinstance(error, SpecError) else ()
    if ctx.meta.get(_JSON_KEY):
        emit_json({"ok": False, "diagnostics": [d.to_json() for d in diagnostics],
                   "error": {"kind": _KINDS[code], "message": message, "details": list(details)}})
    else:
        report_diagnostics(diagnostics, {})
    click.echo(f"hpdsl: {message}", err=True)
    for line in details:
        click.echo(f"  {line}", err=True)
    ctx.exit(code)


_KINDS = {EXIT_SPEC: "spec", EXIT_USAGE: "usage", EXIT_INTERNAL: "internal"}


def _explain(error: Exception, code: int) -> tuple[str, tuple[str, ...]]:
    """Return the one-line message for an error and the lines that detail it."""
    if code == EXIT_INTERNAL:
        if os.environ.get(DEBUG_VARIABLE) == "1":
            traceback.print_exception(error)
        return (f"internal error (a bug): {type(error).__name__}: {error}",
                ("please report it with the command you ran and its input files; "
                 f"set {DEBUG_VARIABLE}=1 to see the traceback",))
    if isinstance(error, LoadError):
        return str(error), error.errors[:20]
    return str(error), ()


@click.group(cls=_Group)
@click.version_option(package_name="hpdsl", prog_name="hpdsl")
def main() -> None:
    """hpdsl: check and compile .hpf specs of model families, profiles and models."""


# --------------------------------------------------------------------------
# Helpers every command shares
# --------------------------------------------------------------------------


def _remember_json(ctx: click.Context, _: click.Parameter, value: bool) -> bool:
    # Recorded on the context so _fail answers in JSON too.
    ctx.meta[_JSON_KEY] = value
    return value


def json_option(command: F) -> F:
    """Add `--json` (one JSON object on stdout instead of text) to a command."""
    return click.option("--json", "as_json", is_flag=True, is_eager=True,
                        callback=_remember_json,
                        help="Print one JSON object to stdout instead of text.")(command)


def emit_json(data: Mapping[str, Any]) -> None:
    """Print one JSON object to stdout."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def report_diagnostics(diagnostics: Sequence[Diagnostic], sources: Mapping[str, Source]) -> None:
    """Render diagnostics to stderr, with their source lines and carets."""
    if diagnostics:
        click.echo(render_diagnostics(diagnostics, sources), err=True)


def plural(count: int, word: str, words: str | None = None) -> str:
    """Return "1 model" or "3 models" (or the given plural)."""
    return f"{count} {word if count == 1 else (words or word + 's')}"


# --------------------------------------------------------------------------
# hpdsl compile
# --------------------------------------------------------------------------


@main.command("compile")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the registry here (atomically); without it, only check.")
@click.option("--no-stdlib", is_flag=True, help="Leave the standard profiles and families out.")
@json_option
@click.pass_context
def compile_command(ctx: click.Context, paths: tuple[Path, ...], output: Path | None,
                    no_stdlib: bool, as_json: bool) -> None:
    """Check .hpf files and folders (default: the standard library); with -o, write registry.json."""
    from hpdsl.api import compile_paths, write_registry

    if not paths and no_stdlib:
        raise click.UsageError("nothing to compile: give .hpf files or folders, or drop --no-stdlib")
    result = compile_paths(list(paths), stdlib=not no_stdlib)
    written = None
    if result.registry is not None and output is not None:
        write_registry(result.registry, output)
        written = str(output)
    summary = _compile_summary(result)
    if as_json:
        emit_json({"ok": result.ok, "diagnostics": [d.to_json() for d in result.diagnostics],
                   "output": written, "summary": summary})
    else:
        report_diagnostics(result.diagnostics, result.sources)
        _echo_compile_outcome(summary, written, output, ok=result.ok)
    ctx.exit(EXIT_OK if result.ok else EXIT_SPEC)


def _compile_summary(result: Any) -> dict[str, Any]:
    registry = result.registry
    return {
        "files": len(result.sources),
        "profiles": None if registry is None else len(registry.profiles),
        "families": None if registry is None else len(registry.families),
        "models": None if registry is None else len(registry.models),
        "errors": len(result.errors),
        "warnings": len(result.warnings),
    }


def _echo_compile_outcome(summary: dict[str, Any], written: str | None, output: Path | None,
                          *, ok: bool) -> None:
    if not ok:
        if output is not None:
            click.echo(f"hpdsl: {output} not written", err=True)
        return
    line = (f"ok: {plural(summary['profiles'], 'profile')}, "
            f"{plural(summary['families'], 'family', 'families')}, "
            f"{plural(summary['models'], 'model')} from {plural(summary['files'], 'file')}")
    if summary["warnings"]:
        line += f" ({plural(summary['warnings'], 'warning')})"
    click.echo(line + (f" -> {written}" if written else ""))


# --------------------------------------------------------------------------
# hpdsl fmt
# --------------------------------------------------------------------------


@main.command("fmt")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--check", is_flag=True, help="Change nothing; list the files that would change, exit 1 if any.")
@click.option("--write", is_flag=True, help="Rewrite the files that would change, in place (atomically).")
@json_option
@click.pass_context
def fmt_command(ctx: click.Context, paths: tuple[Path, ...], check: bool, write: bool,
                as_json: bool) -> None:
    """Print the canonical form of .hpf files (or --check, or --write them in place)."""
    if check and write:
        raise click.UsageError("--check and --write cannot be used together")
    run = _format_files(paths, write=write)
    ok = not run.diagnostics and not (check and run.changed)
    if as_json:
        data = {"ok": ok, "diagnostics": [d.to_json() for d in run.diagnostics],
                "changed": run.changed}
        emit_json({**data, "formatted": run.formatted} if not (check or write) else data)
    else:
        report_diagnostics(run.diagnostics, run.sources)
        _echo_fmt_outcome(run.formatted, run.changed, check=check, write=write)
    ctx.exit(EXIT_OK if ok else EXIT_SPEC)


@attrs.define
class _Formatted:
    """What formatting files produced: canonical texts, files that differ, syntax errors."""

    sources: dict[str, Source] = attrs.field(factory=dict)
    formatted: dict[str, str] = attrs.field(factory=dict)
    changed: list[str] = attrs.field(factory=list)
    diagnostics: list[Diagnostic] = attrs.field(factory=list)


def _format_files(paths: Sequence[Path], *, write: bool) -> _Formatted:
    from hpdsl.api import write_text_atomic
    from hpdsl.fmt import format_source
    from hpdsl.loader import expand_paths, read_source

    run = _Formatted()
    for path in expand_paths(paths):
        source = read_source(path)
        run.sources[source.name] = source
        try:
            text = format_source(source)
        except SpecError as error:
            run.diagnostics.extend(error.diagnostics)
            continue
        run.formatted[source.name] = text
        if text != source.text:
            run.changed.append(source.name)
            if write:
                write_text_atomic(path, text)
    return run


def _echo_fmt_outcome(formatted: dict[str, str], changed: list[str], *, check: bool,
                      write: bool) -> None:
    if not (check or write):
        for text in formatted.values():
            click.echo(text, nl=False)
        return
    for name in changed:
        click.echo(f"{'would reformat' if check else 'reformatted'} {name}")
    verb = "would be reformatted" if check else "reformatted"
    unchanged = len(formatted) - len(changed)
    click.echo(f"{plural(len(changed), 'file')} {verb}, {unchanged} already formatted",
               err=True)


if __name__ == "__main__":
    main(prog_name="hpdsl")
