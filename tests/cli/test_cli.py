"""The real CLI in a subprocess on real files: exit codes, rendering, --json, atomic writes, fmt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpdsl.api import write_text_atomic
from hpdsl.cli import EXIT_INTERNAL, EXIT_OK, EXIT_SPEC, EXIT_USAGE
from hpdsl.errors import InputError

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
family tiny {
  factory "pkg.mod:Tiny"
  variant only "pkg.mod:Tiny" default
}
"""
# Line 3 names a profile nobody declares: a check error, not a syntax error.
BAD_CHECK = """\
// a model of an unknown profile
model broken : no_such_profile {
  hidden 8  layers 2  heads 2  vocab 10
}
"""
BAD_SYNTAX = """\
family tiny {
  factory "pkg.mod:Tiny"
  variant only = "pkg.mod:Tiny"
}
"""


def hpdsl(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `hpdsl ARGS` in a fresh interpreter, in `cwd`."""
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, check=False, env={**os.environ, **(env or {})})


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "good.hpf").write_text(GOOD)
    (tmp_path / "bad.hpf").write_text(BAD_CHECK)
    (tmp_path / "syntax.hpf").write_text(BAD_SYNTAX)
    return tmp_path


def assert_no_traceback(run: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in run.stderr + run.stdout


# --------------------------------------------------------------------------
# compile: exit codes and text
# --------------------------------------------------------------------------


def test_compile_without_paths_checks_the_standard_library(work: Path) -> None:
    run = hpdsl("compile", cwd=work)
    assert run.returncode == EXIT_OK, run.stderr
    assert run.stdout.startswith("ok: ") and " profiles, " in run.stdout and " files" in run.stdout
    assert run.stdout.count("\n") == 1
    assert not list(work.glob("*.json"))


def test_compile_a_good_file_prints_one_summary_line(work: Path) -> None:
    run = hpdsl("compile", "--no-stdlib", "good.hpf", cwd=work)
    assert run.returncode == EXIT_OK, run.stderr
    assert run.stdout == "ok: 0 profiles, 1 family, 0 models from 1 file\n"


def test_a_spec_error_is_rendered_with_its_caret_and_exits_1(work: Path) -> None:
    run = hpdsl("compile", "bad.hpf", cwd=work)
    assert run.returncode == EXIT_SPEC
    assert_no_traceback(run)
    lines = run.stderr.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("bad.hpf:2:16: error[unknown-profile]:"))
    assert lines[head + 1] == "   2 | model broken : no_such_profile {"
    assert lines[head + 2] == " " * 22 + "^" + "~" * 14
    assert run.stdout == ""


def test_a_syntax_error_is_rendered_and_exits_1(work: Path) -> None:
    run = hpdsl("compile", "syntax.hpf", "good.hpf", "--no-stdlib", cwd=work)
    assert run.returncode == EXIT_SPEC
    assert_no_traceback(run)
    assert "syntax.hpf:3:16: error[syntax-error]:" in run.stderr
    assert "   3 |   variant only = \"pkg.mod:Tiny\"" in run.stderr


WARNED = """\
family warned {
  factory "pkg.mod:A"
  variant local  "pkg.mod:Local" default
  variant orphan "pkg.mod:Orphan"
}
"""


def test_warnings_are_shown_but_do_not_fail(work: Path) -> None:
    (work / "warned.hpf").write_text(WARNED)
    run = hpdsl("compile", "warned.hpf", "-o", "registry.json", cwd=work)
    assert run.returncode == EXIT_OK, run.stderr
    assert "warned.hpf:4:11: warning[variant-unreachable]:" in run.stderr
    assert run.stdout.rstrip().endswith("(1 warning) -> registry.json")
    assert (work / "registry.json").is_file()


@pytest.mark.parametrize("args", [
    ("compile", "missing.hpf"),
    ("compile", "--no-stdlib"),
    ("compile", "--no-such-option"),
    ("fmt",),
    ("fmt", "--check", "--write", "good.hpf"),
    ("no-such-command",),
])
def test_usage_and_io_errors_exit_2(work: Path, args: tuple[str, ...]) -> None:
    run = hpdsl(*args, cwd=work)
    assert run.returncode == EXIT_USAGE, run.stderr
    assert_no_traceback(run)


def test_a_missing_path_names_it(work: Path) -> None:
    run = hpdsl("compile", "missing.hpf", cwd=work)
    assert run.stderr == "hpdsl: 'missing.hpf': no such file or folder\n"


def test_the_console_script_is_installed(work: Path) -> None:
    script = Path(sys.executable).parent / "hpdsl"
    run = subprocess.run([str(script), "--version"], cwd=work, capture_output=True, text=True,
                         check=False)
    assert run.returncode == EXIT_OK and run.stdout.startswith("hpdsl, version ")


# --------------------------------------------------------------------------
# compile --json
# --------------------------------------------------------------------------


def test_json_reports_failure_as_one_object(work: Path) -> None:
    run = hpdsl("compile", "bad.hpf", "--json", cwd=work)
    assert run.returncode == EXIT_SPEC
    data = json.loads(run.stdout)
    assert set(data) == {"schema_version", "ok", "diagnostics", "output", "summary"}
    assert data["ok"] is False and data["output"] is None
    first = data["diagnostics"][0]
    assert {k: first[k] for k in ("file", "line", "col", "severity", "code")} == {
        "file": "bad.hpf", "line": 2, "col": 16, "severity": "error", "code": "unknown-profile"}
    assert data["summary"]["errors"] == len(data["diagnostics"]) and data["summary"]["models"] is None
    assert run.stderr == ""


def test_json_reports_success_and_the_output(work: Path) -> None:
    run = hpdsl("compile", "good.hpf", "--json", "-o", "out/registry.json", cwd=work)
    assert run.returncode == EXIT_OK, run.stderr
    data = json.loads(run.stdout)
    assert data["ok"] is True and data["output"] == "out/registry.json"
    assert data["summary"]["families"] >= 1 and data["summary"]["errors"] == 0
    assert (work / "out" / "registry.json").is_file()


def test_json_reports_usage_errors_too(work: Path) -> None:
    run = hpdsl("compile", "missing.hpf", "--json", cwd=work)
    assert run.returncode == EXIT_USAGE
    assert json.loads(run.stdout) == {"schema_version": 1, "ok": False, "diagnostics": [], "error": {
        "kind": "usage", "message": "'missing.hpf': no such file or folder", "details": []}}


# --------------------------------------------------------------------------
# compile -o: atomic writes
# --------------------------------------------------------------------------


def test_output_is_written_and_loadable(work: Path) -> None:
    run = hpdsl("compile", "good.hpf", "-o", "build/deep/registry.json", cwd=work)
    assert run.returncode == EXIT_OK, run.stderr
    assert run.stdout.rstrip().endswith("-> build/deep/registry.json")
    import hpdsl as package

    registry = package.load_registry(work / "build" / "deep" / "registry.json")
    assert "tiny" in registry.families


def test_a_failing_compile_leaves_the_previous_registry_untouched(work: Path) -> None:
    assert hpdsl("compile", "good.hpf", "-o", "registry.json", cwd=work).returncode == EXIT_OK
    before = (work / "registry.json").read_bytes()
    listing = sorted(p.name for p in work.iterdir())
    run = hpdsl("compile", "good.hpf", "bad.hpf", "-o", "registry.json", cwd=work)
    assert run.returncode == EXIT_SPEC
    assert (work / "registry.json").read_bytes() == before
    assert sorted(p.name for p in work.iterdir()) == listing  # no temp file left behind
    assert "registry.json not written" in run.stderr


def test_an_unwritable_output_is_an_io_error(work: Path) -> None:
    run = hpdsl("compile", "good.hpf", "-o", "good.hpf/registry.json", cwd=work)
    assert run.returncode == EXIT_USAGE
    assert_no_traceback(run)
    assert run.stderr.startswith("hpdsl: cannot write 'good.hpf/registry.json': ")
    assert sorted(p.name for p in work.iterdir()) == ["bad.hpf", "good.hpf", "syntax.hpf"]


def test_a_failed_replace_removes_the_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "registry.json"
    (target / "occupied").mkdir(parents=True)  # os.replace cannot put a file over a folder
    with pytest.raises(InputError, match="cannot write"):
        write_text_atomic(target, "{}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.json"]
    assert target.is_dir()


# --------------------------------------------------------------------------
# Internal errors
# --------------------------------------------------------------------------

# A real command added to the real group, whose body has a bug.
BUGGY = """\
import sys
from hpdsl import cli

@cli.main.command("boom")
def boom() -> None:
    raise ZeroDivisionError("the bug")

cli.main(["boom"], prog_name="hpdsl")
"""


def test_a_bug_exits_3_without_a_traceback(work: Path) -> None:
    run = subprocess.run([sys.executable, "-c", BUGGY], cwd=work, capture_output=True, text=True,
                         check=False, env={**os.environ, "HPDSL_DEBUG": "0"})
    assert run.returncode == EXIT_INTERNAL
    assert run.stderr.startswith("hpdsl: internal error (a bug): ZeroDivisionError: the bug\n")
    assert "report" in run.stderr and "HPDSL_DEBUG=1" in run.stderr
    assert_no_traceback(run)


def test_hpdsl_debug_shows_the_traceback(work: Path) -> None:
    run = subprocess.run([sys.executable, "-c", BUGGY], cwd=work, capture_output=True, text=True,
                         check=False, env={**os.environ, "HPDSL_DEBUG": "1"})
    assert run.returncode == EXIT_INTERNAL
    assert "Traceback" in run.stderr and "ZeroDivisionError" in run.stderr


# --------------------------------------------------------------------------
# fmt
# --------------------------------------------------------------------------


def canonical(work: Path, name: str) -> str:
    run = hpdsl("fmt", name, cwd=work)
    assert run.returncode == EXIT_OK, run.stderr
    return run.stdout


def test_fmt_prints_the_canonical_form(work: Path) -> None:
    (work / "messy.hpf").write_text('family   tiny{factory "pkg.mod:Tiny"\n'
                                    'variant only "pkg.mod:Tiny"   default}\n')
    text = canonical(work, "messy.hpf")
    assert text != (work / "messy.hpf").read_text()
    (work / "clean.hpf").write_text(text)
    assert canonical(work, "clean.hpf") == text  # formatting twice changes nothing


def test_fmt_check_lists_the_files_that_would_change(work: Path) -> None:
    (work / "messy.hpf").write_text('family   tiny{factory "pkg.mod:Tiny"\n'
                                    'variant only "pkg.mod:Tiny"   default}\n')
    (work / "clean.hpf").write_text(canonical(work, "messy.hpf"))
    run = hpdsl("fmt", "--check", "clean.hpf", "messy.hpf", cwd=work)
    assert run.returncode == EXIT_SPEC
    assert run.stdout == "would reformat messy.hpf\n"
    assert hpdsl("fmt", "--check", "clean.hpf", cwd=work).returncode == EXIT_OK


def test_fmt_write_rewrites_in_place(work: Path) -> None:
    (work / "messy.hpf").write_text('family   tiny{factory "pkg.mod:Tiny"\n'
                                    'variant only "pkg.mod:Tiny"   default}\n')
    expected = canonical(work, "messy.hpf")
    run = hpdsl("fmt", "--write", "messy.hpf", cwd=work)
    assert run.returncode == EXIT_OK, run.stderr
    assert run.stdout == "reformatted messy.hpf\n"
    assert (work / "messy.hpf").read_text() == expected
    assert hpdsl("fmt", "--check", "messy.hpf", cwd=work).returncode == EXIT_OK


def test_fmt_of_a_syntax_error_exits_1_with_the_diagnostic(work: Path) -> None:
    run = hpdsl("fmt", "--check", "syntax.hpf", cwd=work)
    assert run.returncode == EXIT_SPEC
    assert_no_traceback(run)
    assert "syntax.hpf:3:16: error[syntax-error]:" in run.stderr


def test_help_lists_every_command_as_its_own_help_says() -> None:
    import importlib

    import click
    import click.testing

    from hpdsl.cli.app import COMMANDS, SUMMARIES, _shorten, main

    assert set(SUMMARIES) == set(COMMANDS)
    for name, target in COMMANDS.items():
        module, _, attr = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        assert _shorten(SUMMARIES[name], 200) == command.get_short_help_str(200), name
    listed = click.testing.CliRunner().invoke(main, ["--help"]).output
    assert all(name in listed for name in COMMANDS)
