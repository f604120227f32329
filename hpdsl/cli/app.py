"""The hpdsl command group: errors to exit codes in one place, and the helpers commands share.

Every command is one function under the `main` group. The group maps errors to
exit codes in one place (`_Group.invoke`), so a command only reports what it
found and says whether it succeeded: spec diagnostics exit 1, usage and I/O
errors 2, anything else is a bug in hpdsl and exits 3 with a one-line report
(the traceback only with HPDSL_DEBUG=1). The group imports a command's module
only when that command runs (or `--help` lists it), and commands import the
pipeline in their bodies, so `hpdsl --help` stays fast and a new command costs
the others nothing.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from hpdsl.cli.json_output import emit_json

if TYPE_CHECKING:  # imported where used: `hpdsl --help` needs click alone (bench/bench_startup.py)
    from hpdsl.diagnostics import Diagnostic, Source

EXIT_OK = 0
EXIT_SPEC = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3


DEBUG_VARIABLE = "HPDSL_DEBUG"
_JSON_KEY = "hpdsl.json"

F = TypeVar("F", bound=Callable[..., Any])

# Command name -> "module:function" of its click command, imported on first use.
COMMANDS: dict[str, str] = {
    "compile": "hpdsl.cli.build:compile_command",
    "fmt": "hpdsl.cli.build:fmt_command",
    "stack": "hpdsl.cli.models:stack_command",
    "import-hf": "hpdsl.cli.models:import_hf_command",
    "estimate": "hpdsl.cli.cost:estimate_command",
    "search": "hpdsl.cli.cost:search_command",
    "explain": "hpdsl.cli.torch:explain_command",
    "train": "hpdsl.cli.train:train_command",
    "diff": "hpdsl.cli.diff:diff_command",
    "lsp": "hpdsl.cli.lsp:lsp_command",
    "calibrate": "hpdsl.cli.calibrate:calibrate_command",
}

# Command name -> its one-line help, so `hpdsl --help` lists the commands without importing
# them; tests/cli/test_cli.py holds each equal to the command's own docstring.
SUMMARIES: dict[str, str] = {
    "compile": "Check .hpf files and folders (default: the standard library); with -o, write registry.json.",
    "fmt": "Print the canonical form of .hpf files (or --check, or --write them in place).",
    "stack": "Print a model's layer groups and, per kind, the fields it binds.",
    "import-hf": "Turn a HuggingFace config.json into a model .hpf.",
    "estimate": "Count a model's parameters exactly and price one parallel strategy (memory, FLOPs, time).",
    "search": "Price every valid strategy for N devices as arrays; rank those that fit by step time.",
    "explain": ("Say which family, variant, selector clause and mesh sizes built a module, "
                "and where they are declared."),
    "diff": "Compare two specs (.hpf files or folders) or registry.json files, model by model.",
    "lsp": "Run the .hpf language server over stdio: diagnostics, hover, definitions, completion, quick fixes.",
    "train": "Train a strategy K steps on N processes; print the losses, metrics and measured bytes beside the estimate.",
    "calibrate": "Measure this machine as `hpdsl train` runs (--ranks processes at once) and write a device .hpf.",
}


# --------------------------------------------------------------------------
# The group: one place for errors and exit codes
# --------------------------------------------------------------------------


def exit_code(error: BaseException) -> int:
    """Return the exit code an error ends the command with."""
    from hpdsl.errors import HpdslError, InputError, LoadError

    # Every HpdslError is a spec error (exit 1) but these, which are usage and I/O errors.
    if isinstance(error, (InputError, LoadError)):
        return EXIT_USAGE
    if isinstance(error, HpdslError):
        return EXIT_SPEC
    return EXIT_INTERNAL


class _Group(click.Group):
    """The hpdsl command group: loads commands lazily, turns every escaping error into its exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module, _, name = COMMANDS[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own would import every command to read its help; the summaries say the same.
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in self.commands or name not in SUMMARIES:
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                rows.append((name, _shorten(SUMMARIES[name], limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

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


def _shorten(text: str, limit: int) -> str:
    # Exactly what the command would list: click shortens its help the same way.
    return click.Command(None, help=text).get_short_help_str(limit)


def _fail(ctx: click.Context, error: Exception) -> NoReturn:
    from hpdsl.errors import SpecError

    code = exit_code(error)
    message, details = _explain(error, code)
    diagnostics = error.diagnostics if isinstance(error, SpecError) else ()
    if ctx.meta.get(_JSON_KEY):
        emit_json({"ok": False, "diagnostics": [d.to_json() for d in diagnostics],
                   "error": {"kind": _KINDS[code], "message": message, "details": list(details)}})
    else:
        report_diagnostics(diagnostics, getattr(error, "sources", {}))
    click.echo(f"hpdsl: {message}", err=True)
    for line in details:
        click.echo(f"  {line}", err=True)
    ctx.exit(code)


_KINDS = {EXIT_SPEC: "spec", EXIT_USAGE: "usage", EXIT_INTERNAL: "internal"}


def _explain(error: Exception, code: int) -> tuple[str, tuple[str, ...]]:
    """Return the one-line message for an error and the lines that detail it."""
    from hpdsl.errors import HpdslError, LoadError

    if code == EXIT_INTERNAL:
        if os.environ.get(DEBUG_VARIABLE) == "1":
            traceback.print_exception(error)
        return (f"internal error (a bug): {type(error).__name__}: {error}",
                ("please report it with the command you ran and its input files; "
                 f"set {DEBUG_VARIABLE}=1 to see the traceback",))
    # The message alone: diagnostics and a LoadError's paths are printed in full here,
    # not in the short list that str() of the error carries.
    if isinstance(error, LoadError):
        return error.message, error.errors[:20]
    if isinstance(error, HpdslError):
        return error.message, ()
    return str(error), ()


@click.group(cls=_Group)
@click.version_option(package_name="hpdsl", prog_name="hpdsl")
@click.pass_context
def main(ctx: click.Context) -> None:
    """hpdsl: check and compile .hpf specs of model families, profiles and models.

    \b
    Examples:
      hpdsl compile examples/                  check every spec in a folder
      hpdsl compile examples/ -o registry.json
      hpdsl estimate examples/llama3_8b.hpf --tp 8 --pp 2
      hpdsl diff examples/llama2_7b.hpf examples/llama3_8b.hpf
      hpdsl diff registry.json examples/ --exit-code   CI: exit 1 if the specs changed
      hpdsl lsp                                the language server, for editors
      eval "$(hpdsl completion bash)"          shell completion

    A [tool.hpdsl] table in the project's pyproject.toml sets defaults (docs/ci.md).
    """
    if ctx.invoked_subcommand in ("lsp", "completion"):  # nothing of theirs is configured there
        return
    from hpdsl.cli.project import apply

    try:
        cwd = Path.cwd()
    except OSError:  # the working directory was removed: no project to read
        return
    apply(ctx, cwd)


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


def report_diagnostics(diagnostics: Sequence[Diagnostic], sources: Mapping[str, Source]) -> None:
    """Render diagnostics to stderr, with their source lines and carets."""
    if diagnostics:
        from hpdsl.diagnostics import render_diagnostics

        click.echo(render_diagnostics(diagnostics, sources), err=True)


def plural(count: int, word: str, words: str | None = None) -> str:
    """Return "1 model" or "3 models" (or the given plural)."""
    return f"{count} {word if count == 1 else (words or word + 's')}"


# --------------------------------------------------------------------------
# hpdsl completion: click's shell completion, as a script to source
# --------------------------------------------------------------------------

COMPLETE_VARIABLE = "_HPDSL_COMPLETE"


@main.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion_command(shell: str) -> None:
    """Print the shell-completion script for bash, zsh or fish (click's).

    \b
    Examples:
      eval "$(hpdsl completion bash)"        # in ~/.bashrc
      hpdsl completion fish > ~/.config/fish/completions/hpdsl.fish
    """
    from click.shell_completion import get_completion_class

    completion = get_completion_class(shell)
    assert completion is not None  # every shell the Choice allows has a class
    click.echo(completion(main, {}, "hpdsl", COMPLETE_VARIABLE).source())
