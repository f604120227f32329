"""`hpdsl compile` and `hpdsl fmt`: .hpf files into registry.json, and into canonical text."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import click

from hpdsl.cli.app import EXIT_OK, EXIT_SPEC, emit_json, json_option, plural, report_diagnostics
from hpdsl.cli.json_output import emit_raw_json
from hpdsl.diagnostics import Diagnostic, Source
from hpdsl.errors import SpecError


# --------------------------------------------------------------------------
# hpdsl compile
# --------------------------------------------------------------------------


@click.command("compile")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the registry here (atomically); without it, only check.")
@click.option("--no-stdlib", is_flag=True, help="Leave the standard profiles and families out.")
@click.option("--import-path", "import_paths", multiple=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="A folder imports may also read from (repeatable).")
@click.option("--allow-any-import", is_flag=True,
              help="Let imports read any .hpf file, outside the project too.")
@click.option("--format", "output_format", type=click.Choice(["text", "json", "sarif"]),
              default="text", show_default=True,
              help="text on stderr, one JSON object (as --json), or a SARIF 2.1.0 log on stdout.")
@json_option
@click.pass_context
def compile_command(ctx: click.Context, paths: tuple[Path, ...], output: str | None,
                    no_stdlib: bool, import_paths: tuple[Path, ...], allow_any_import: bool,
                    output_format: str, as_json: bool) -> None:
    """Check .hpf files and folders (default: the standard library); with -o, write registry.json.

    \b
    Examples:
      hpdsl compile examples/llama3_8b.hpf
      hpdsl compile examples/ -o registry.json
      hpdsl compile --format sarif examples/ > hpdsl.sarif
      hpdsl compile - < examples/llama3_8b.hpf     # - reads standard input
    """
    if not paths and no_stdlib:
        raise click.UsageError("nothing to compile: give .hpf files or folders, or drop --no-stdlib")
    try:
        _compile_and_print(ctx, paths, output, no_stdlib, import_paths, allow_any_import, output_format, as_json)
    except (click.exceptions.Exit, click.ClickException, click.Abort):
        raise
    except Exception as error:
        if output_format == "sarif":  # a SARIF reader gets a valid log that says the run failed
            _emit_sarif((), failure=_failure(error))
        raise  # the group reports it and picks the exit code


def _compile_and_print(ctx: click.Context, paths: tuple[Path, ...], output: str | None, no_stdlib: bool,
                       import_paths: tuple[Path, ...], allow_any_import: bool, output_format: str,
                       as_json: bool) -> None:
    if not paths and output is None:  # the standard library alone: the same report every run
        from hpdsl.cli.checked import stdlib_report

        ok, summary, diagnostics, sources = stdlib_report(_stdlib_report)
        _print_compile(ok, summary, diagnostics, sources, None, None, output_format, as_json)
        ctx.exit(EXIT_OK if ok else EXIT_SPEC)
    from hpdsl.api import check_paths, check_sources, output_target, write_registry
    from hpdsl.cli.stdin import read_stdin, wants_stdin
    from hpdsl.loader import ImportPolicy, expand_paths

    policy = ImportPolicy(import_paths, anywhere=allow_any_import)
    stdin = wants_stdin(paths)
    inputs = [] if stdin else expand_paths(paths)
    if output is not None:
        output_target(output, inputs)  # refuse before compiling, too
    if stdin:
        result = check_sources([read_stdin()], stdlib=not no_stdlib, imports=policy)
    else:
        result = check_paths(list(paths), stdlib=not no_stdlib, imports=policy)
    written = None
    if result.registry is not None and output is not None:
        write_registry(result.registry, output, inputs=inputs)
        written = str(output)
    _print_compile(result.ok, _compile_summary(result), result.diagnostics, result.sources, written, output,
                   output_format, as_json)
    ctx.exit(EXIT_OK if result.ok else EXIT_SPEC)


def _stdlib_report() -> tuple[bool, dict[str, Any], tuple[Diagnostic, ...], dict[str, Source]]:
    from hpdsl.api import check_paths

    result = check_paths([])
    return result.ok, _compile_summary(result), result.diagnostics, dict(result.sources)


def _print_compile(ok: bool, summary: dict[str, Any], diagnostics: Sequence[Diagnostic],
                   sources: dict[str, Source], written: str | None, output: str | None, output_format: str,
                   as_json: bool) -> None:
    if output_format == "sarif":
        _emit_sarif(diagnostics)
    elif as_json or output_format == "json":
        emit_json({"ok": ok, "diagnostics": [d.to_json() for d in diagnostics],
                   "output": written, "summary": summary})
    else:
        report_diagnostics(diagnostics, sources)
        _echo_compile_outcome(summary, written, output, ok=ok)


def _emit_sarif(diagnostics: Sequence[Diagnostic], failure: Any = None) -> None:
    import hpdsl
    from hpdsl.diagnostics.sarif import to_sarif

    emit_raw_json(to_sarif(diagnostics, version=hpdsl.__version__, root=Path.cwd(), failure=failure))


def _failure(error: Exception) -> Any:
    """Return the SARIF Failure of an error that stopped `hpdsl compile`."""
    from hpdsl.cli.app import exit_code
    from hpdsl.diagnostics.sarif import Failure

    code = exit_code(error)
    message = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
    details = tuple(str(line) for line in getattr(error, "errors", ())[:20])
    return Failure(f"hpdsl: {message}", details, code)


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


def _echo_compile_outcome(summary: dict[str, Any], written: str | None, output: str | None,
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


@click.command("fmt")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--check", is_flag=True, help="Change nothing; list the files that would change, exit 1 if any.")
@click.option("--write", is_flag=True, help="Rewrite the files that would change, in place (atomically).")
@click.option("--diff", "show_diff", is_flag=True,
              help="Change nothing; print a unified diff of what would change, exit 1 if anything would.")
@json_option
@click.pass_context
def fmt_command(ctx: click.Context, paths: tuple[Path, ...], check: bool, write: bool, show_diff: bool,
                as_json: bool) -> None:
    """Print the canonical form of .hpf files (or --check, or --write them in place).

    \b
    Examples:
      hpdsl fmt examples/llama3_8b.hpf
      hpdsl fmt --check examples/
      hpdsl fmt --write examples/
      hpdsl fmt --diff examples/
      hpdsl fmt - < examples/llama3_8b.hpf        # - reads standard input, prints to stdout
    """
    if write and (check or show_diff):
        raise click.UsageError(f"{'--check' if check else '--diff'} and --write cannot be used together")
    run = _format_files(paths, write=write)
    check = check or show_diff
    ok = not run.diagnostics and not (check and run.changed)
    diffs = {name: _unified_diff(run.sources[name].text, run.formatted[name], name) for name in run.changed}
    if as_json:
        data = {"ok": ok, "diagnostics": [d.to_json() for d in run.diagnostics],
                "changed": run.changed}
        if show_diff:
            data["diffs"] = diffs
        emit_json({**data, "formatted": run.formatted} if not (check or write) else data)
    else:
        report_diagnostics(run.diagnostics, run.sources)
        if show_diff:
            click.echo("".join(diffs.values()), nl=False)
        _echo_fmt_outcome(run.formatted, run.changed, check=check, write=write, quiet=show_diff)
    ctx.exit(EXIT_OK if ok else EXIT_SPEC)


def _unified_diff(old: str, new: str, name: str) -> str:
    """Return the unified diff from a file's text to its canonical form (a/NAME to b/NAME, as git shows)."""
    import difflib

    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 f"a/{name}", f"b/{name}")
    # A last line without its newline would run into the next header.
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)


@attrs.define
class _Formatted:
    """What formatting files produced: canonical texts, files that differ, syntax errors."""

    sources: dict[str, Source] = attrs.field(factory=dict)
    formatted: dict[str, str] = attrs.field(factory=dict)
    changed: list[str] = attrs.field(factory=list)
    diagnostics: list[Diagnostic] = attrs.field(factory=list)


def _format_files(paths: Sequence[Path], *, write: bool) -> _Formatted:
    from hpdsl.cli.stdin import read_stdin, wants_stdin
    from hpdsl.loader import expand_paths, read_source

    run = _Formatted()
    stdin = wants_stdin(paths)
    if stdin and write:
        raise click.UsageError("--write cannot rewrite standard input: drop --write to print the result")
    for path in [] if stdin else expand_paths(paths):
        _format_one(run, read_source(path), path, write=write)
    if stdin:
        _format_one(run, read_stdin(), None, write=False)
    return run


def _format_one(run: _Formatted, source: Source, path: Path | None, *, write: bool) -> None:
    """Format one source into `run`; rewrite its file if `write` and it changed."""
    from hpdsl.api import rewrite_source
    from hpdsl.fmt import format_source

    run.sources[source.name] = source
    try:
        text = format_source(source)
    except SpecError as error:
        run.diagnostics.extend(error.diagnostics)
        return
    run.formatted[source.name] = text
    if text != source.text:
        run.changed.append(source.name)
        if write and path is not None:
            rewrite_source(path, text)


def _echo_fmt_outcome(formatted: dict[str, str], changed: list[str], *, check: bool,
                      write: bool, quiet: bool = False) -> None:
    if not (check or write):
        for text in formatted.values():
            click.echo(text, nl=False)
        return
    if not quiet:  # --diff: the diff's own headers name the files
        for name in changed:
            click.echo(f"{'would reformat' if check else 'reformatted'} {name}")
    verb = "would be reformatted" if check else "reformatted"
    unchanged = len(formatted) - len(changed)
    click.echo(f"{plural(len(changed), 'file')} {verb}, {unchanged} already formatted",
               err=True)
