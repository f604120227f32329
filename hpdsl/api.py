"""The public pipeline, one function per stage: texts into ASTs, diagnostics, IR and registry.json.

    parse(text, name) -> ast.File                    (raises SpecError on bad syntax)
    check(files) -> (Scope, diagnostics)
    lower(scope, sources) -> RegistryIR              (only for a scope without errors)
    compile_sources / compile_paths -> Registry      (raises one SpecError with every diagnostic)
    check_sources / check_paths -> CompileResult     (the same run, returned rather than raised)
    write_registry(registry, path)                   (atomic)
    bind_model(paths, model) -> CostModel            (compile, pick a model, bind it)

Every run collects the syntax errors of every file; a file that does not parse
is left out of the check, the others are still checked, so one run reports as
much as it can. Warnings do not fail a compilation (a Registry carries them on
`warnings`); any error means no registry. The CLI uses check_* to print every
diagnostic itself; a library calls compile_* and catches SpecError.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hpdsl import ast
from hpdsl.check import check_files, check_lowering
from hpdsl.diagnostics import Collector, Diagnostic, Source
from hpdsl.diagnostics.diagnostic import capped
from hpdsl.errors import InputError, SpecError
from hpdsl.files import write_text_atomic
from hpdsl.ir.lower import lower_registry
from hpdsl.ir.nodes import RegistryIR
from hpdsl.loader import ImportPolicy, Loaded, load_paths, load_sources
from hpdsl.registry import Registry
from hpdsl.scope import Scope
from hpdsl.syntax import parse_text

if TYPE_CHECKING:
    from hpdsl.bound.bind import CostModel


@attrs.frozen
class CompileResult:
    """The outcome of one compilation: the registry (None on any error) and every diagnostic."""

    registry: Registry | None
    diagnostics: tuple[Diagnostic, ...]
    sources: dict[str, Source]

    @property
    def ok(self) -> bool:
        """Return whether the compilation succeeded (warnings allowed)."""
        return self.registry is not None

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        """Return the diagnostics that fail the compilation."""
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        """Return the diagnostics that do not fail it."""
        return tuple(d for d in self.diagnostics if not d.is_error)

    def unwrap(self) -> Registry:
        """Return the registry; raise SpecError carrying every diagnostic if there is none."""
        if self.registry is None:
            count = len(self.errors)
            raise SpecError(f"the specs have {count} error{'s' * (count != 1)}", self.diagnostics,
                            self.sources)
        return self.registry


def parse(text: str, name: str = "<string>") -> ast.File:
    """Parse one .hpf text into an ast.File; raise SpecError on bad syntax."""
    return parse_text(text, name)


def check(files: Sequence[ast.File]) -> tuple[Scope, tuple[Diagnostic, ...]]:
    """Check parsed files together; return their scope and every diagnostic."""
    return check_files(files)


def lower(scope: Scope, sources: Sequence[Source]) -> RegistryIR:
    """Lower a scope that checked without errors into a RegistryIR."""
    return lower_registry(scope, sources)


_PROJECT = ImportPolicy()


def compile_sources(sources: Sequence[Source], *, stdlib: bool = True,
                    imports: ImportPolicy = _PROJECT) -> Registry:
    """Compile in-memory sources (their imports, and by default the standard library); SpecError on errors."""
    return check_sources(sources, stdlib=stdlib, imports=imports).unwrap()


def compile_paths(paths: Sequence[str | os.PathLike[str]], *, stdlib: bool = True,
                  imports: ImportPolicy = _PROJECT) -> Registry:
    """Compile .hpf files and folders; SpecError on spec errors, InputError if a path cannot be read."""
    return check_paths(paths, stdlib=stdlib, imports=imports).unwrap()


def check_sources(sources: Sequence[Source], *, stdlib: bool = True,
                  imports: ImportPolicy = _PROJECT) -> CompileResult:
    """Compile in-memory sources, returning every diagnostic instead of raising on errors.

    `imports` says where imports may lead beyond the project (loader.ImportPolicy).
    """
    return _compile(load_sources(sources, stdlib=stdlib, imports=imports))


def check_paths(paths: Sequence[str | os.PathLike[str]], *, stdlib: bool = True,
                imports: ImportPolicy = _PROJECT) -> CompileResult:
    """Compile .hpf files and folders, returning every diagnostic; raise InputError on an unreadable path."""
    return _compile(load_paths(paths, stdlib=stdlib, imports=imports))


def _compile(loaded: Loaded) -> CompileResult:
    checked = check_lowering(loaded.files)
    collector = Collector([*loaded.diagnostics, *checked.diagnostics])
    diagnostics = capped(collector.sorted())
    registry = None
    if not collector.has_errors:
        warnings = tuple(d for d in diagnostics if not d.is_error)
        # The check lowered every clean declaration already: the registry is that lowering.
        registry = Registry(lower_registry(checked.scope, loaded.sources, loaded.stable_names(),
                                           lowered=checked.clean.lowered()), warnings)
    return CompileResult(registry, diagnostics, {source.name: source for source in loaded.sources})


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def write_registry(registry: Registry, path: str | os.PathLike[str], *,
                   inputs: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Write registry.json atomically; raise InputError if it cannot or must not be written there."""
    target = output_target(path, inputs)
    if target.suffix == ".hpf":
        raise InputError(f"cannot write the registry to '{os.fspath(path)}': it is named as a .hpf "
                         "source; give a .json path")
    write_text_atomic(target, registry.to_json())


def output_target(given: str | os.PathLike[str],
                  inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Return `given` as a path to replace; raise InputError where replacing it would destroy something.

    Refused: a trailing '/' (a folder was meant), an existing node that is not a regular
    file (a device, a FIFO, a folder, a symbolic link: replacing it would not write
    through it), and any of `inputs` (the run's own sources).
    """
    text = os.fspath(given)
    if text.endswith(("/", os.sep)):
        raise InputError(f"cannot write '{text}': it ends in '/', so it names a folder, not a file")
    path = Path(text)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise InputError(f"cannot write '{text}': {(exc.strerror or str(exc)).lower()}") from None
    if stat.S_ISLNK(mode):
        raise InputError(f"cannot write '{text}': it is a symbolic link; name the file it points "
                         f"to ({os.path.realpath(path)}) to write there")
    if not stat.S_ISREG(mode):
        raise InputError(f"cannot write '{text}': it exists and is not a regular file")
    for source in inputs:
        if _same_file(path, Path(source)):
            raise InputError(f"cannot write '{text}': it is an input of this run, and writing "
                             "would destroy it")
    return path


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def rewrite_source(path: Path, text: str) -> Path:
    """Rewrite an existing source file with `text`, through a symlink, keeping its permissions and links.

    The file the path resolves to is written: atomically when it has one name, in
    place (after the text is fully rendered) when it has hard links, so every name
    keeps seeing it. A read-only file is refused. Returns the file written.
    """
    target = Path(os.path.realpath(path))
    try:
        info = target.stat()
    except OSError as exc:
        raise InputError(f"cannot rewrite '{path}': {(exc.strerror or str(exc)).lower()}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"cannot rewrite '{path}': it is not a regular file")
    if not info.st_mode & 0o222:
        raise InputError(f"cannot rewrite '{path}': it is read-only; make it writable to format it")
    if info.st_nlink == 1:
        write_text_atomic(target, text)
        return target
    try:
        with open(target, "r+", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.truncate()
            stream.flush()
            os.fsync(stream.fileno())
    except OSError as exc:
        raise InputError(f"cannot rewrite '{path}': {(exc.strerror or str(exc)).lower()}") from None
    return target


__all__ = ["CompileResult", "bind_model", "check", "check_paths", "check_sources", "compile_paths",
           "compile_sources", "lower", "output_target", "parse", "rewrite_source", "write_registry",
           "write_text_atomic"]


def bind_model(paths: Sequence[str | os.PathLike[str]], model: str | None = None, *,
               stdlib: bool = True, sets: Mapping[str, Any] | None = None, pairs: Sequence[str] = ()) -> CostModel:
    """Compile `paths`, pick `model` (or the only model in scope), apply `sets` and bind it to its profile.

    `pairs` are `FIELD=VALUE` overrides as `--set` takes them, parsed against the
    standard fields and the author fields the model's profile and the families declare.
    """
    from hpdsl.bound.bind import bind
    from hpdsl.diagnostics import did_you_mean
    from hpdsl.ir.overrides import apply_sets, declared_fields, parse_sets

    registry = compile_paths(paths, stdlib=stdlib)
    models = registry.models
    if model is None:
        if len(models) != 1:
            names = ", ".join(sorted(models)) or "none"
            raise InputError(f"{len(models)} models are in scope ({names}); choose one with --model")
        model = next(iter(models))
    if model not in models:
        raise InputError(f"no model '{model}' in scope; {did_you_mean(model, models)}")
    profile = registry.profiles[models[model].profile]
    parsed = parse_sets(pairs, declared_fields(profile, registry.families)) if pairs else {}
    spec = apply_sets(models[model], {**(sets or {}), **parsed})
    return bind(spec, profile, families=registry.families)

