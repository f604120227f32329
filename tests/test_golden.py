"""Golden files per pipeline stage: small inputs beside what each stage makes of them.

    tests/golden/parse/NAME.hpf     -> NAME.ast   the AST, dumped without spans
    tests/golden/check/NAME.hpf     -> NAME.txt   the diagnostics, as `hpdsl compile` prints them
    tests/golden/ir/NAME.hpf        -> NAME.json  the lowered IR of one file
    tests/golden/registry/NAME/     -> NAME.json  registry.json of a folder of files
    tests/golden/stack/NAME.txt                   `hpdsl stack examples/NAME.hpf`
    tests/golden/fmt/NAME.in.hpf    -> NAME.out.hpf (tests/fmt/test_fmt.py)

Inputs are compiled without the standard library (each brings its own tiny
vocabulary, profiles and families), so editing profiles/ or families/ rewrites
only the stack summaries of the shipped examples. The source hash and absolute
paths are masked. `pytest --update-golden` rewrites every file; review the diff.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from goldens import GOLDEN, REPO, compare_golden, compile_inputs, dump_ast, mask

from hpdsl.api import check, lower, parse
from hpdsl.cli import main
from hpdsl.diagnostics import Source, render_diagnostics
from hpdsl.ir.convert import registry_to_json

EXAMPLES = REPO / "examples"


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


# --------------------------------------------------------------------------
# What each stage makes of one input (run with the input's folder as cwd)
# --------------------------------------------------------------------------


def parse_stage(path: Path) -> str:
    """Return the AST of one file, dumped."""
    return dump_ast(parse(_read(path), path.name))


def check_stage(path: Path) -> str:
    """Return the diagnostics of one file compiled alone, rendered as the CLI prints them."""
    compiled = compile_inputs([path.name])
    assert compiled.diagnostics, f"{path.name} is a check input but compiles clean"
    return mask(render_diagnostics(compiled.diagnostics, compiled.sources) + "\n", path.parent)


def ir_stage(path: Path) -> str:
    """Return the IR JSON of one file through parse, check and lower."""
    source = Source(path.name, _read(path))
    scope, diagnostics = check([parse(source.text, source.name)])
    assert not diagnostics, render_diagnostics(diagnostics, {source.name: source})
    return mask(registry_to_json(lower(scope, [source])), path.parent)


def registry_stage(folder: Path) -> str:
    """Return registry.json of a folder of files, compiled together."""
    compiled = compile_inputs([folder.name])
    assert compiled.registry is not None, render_diagnostics(compiled.diagnostics, compiled.sources)
    return mask(registry_to_json(compiled.registry), folder.parent)


STAGES: dict[str, tuple[Callable[[Path], str], str]] = {
    "parse": (parse_stage, ".ast"),
    "check": (check_stage, ".txt"),
    "ir": (ir_stage, ".json"),
    "registry": (registry_stage, ".json"),
}


def stage_inputs(stage: str) -> list[Path]:
    """Return the inputs of a stage: its .hpf files, or for registry its folders."""
    folder = GOLDEN / stage
    if stage == "registry":
        return sorted(path for path in folder.iterdir() if path.is_dir())
    return sorted(folder.glob("*.hpf"))


CASES = [(stage, path) for stage in STAGES for path in stage_inputs(stage)]


@pytest.mark.parametrize(("stage", "path"), CASES, ids=[f"{s}/{p.stem}" for s, p in CASES])
def test_stage_matches_golden(stage: str, path: Path, update_golden: bool,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    make, suffix = STAGES[stage]
    monkeypatch.chdir(path.parent)  # source names are relative to the working directory
    compare_golden(path.parent / (path.stem + suffix), make(path), update_golden)


@pytest.mark.parametrize("stage", list(STAGES))
def test_every_golden_has_its_input(stage: str) -> None:
    _, suffix = STAGES[stage]
    inputs = {path.stem for path in stage_inputs(stage)}
    outputs = {path.stem for path in (GOLDEN / stage).glob(f"*{suffix}")}
    assert inputs, f"tests/golden/{stage} has no inputs"
    assert outputs == inputs, "a golden file without its input, or an input without its golden"


@pytest.mark.parametrize("path", stage_inputs("check"), ids=lambda p: p.stem)
def test_the_cli_prints_the_check_goldens(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(path.parent)
    run = CliRunner().invoke(main, ["compile", "--no-stdlib", path.name], prog_name="hpdsl")
    assert run.exit_code == 1, run.output
    assert run.stderr == _read(path.with_suffix(".txt"))


# --------------------------------------------------------------------------
# The shipped library and examples: they compile, and each model's stack
# --------------------------------------------------------------------------


def example_files() -> list[Path]:
    """Return every shipped example .hpf, sorted."""
    return sorted(EXAMPLES.glob("*.hpf"))


def test_the_standard_library_and_every_example_compile_clean() -> None:
    stdlib = compile_inputs([], stdlib=True)
    assert stdlib.diagnostics == () and stdlib.registry is not None
    assert stdlib.registry.profiles and stdlib.registry.families and not stdlib.registry.models
    examples = compile_inputs([EXAMPLES], stdlib=True)
    assert examples.diagnostics == (), render_diagnostics(examples.diagnostics, examples.sources)
    assert examples.registry is not None
    assert set(examples.registry.models) == {path.stem for path in example_files()}


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.stem)
def test_example_stack_matches_golden(path: Path, update_golden: bool,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    run = CliRunner().invoke(main, ["stack", str(path.relative_to(REPO))], prog_name="hpdsl")
    assert run.exit_code == 0, run.output
    compare_golden(GOLDEN / "stack" / f"{path.stem}.txt", mask(run.stdout, REPO), update_golden)


def test_every_stack_golden_has_its_example() -> None:
    goldens = {path.stem for path in (GOLDEN / "stack").glob("*.txt")}
    assert goldens == {path.stem for path in example_files()}
