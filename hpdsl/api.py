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
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from hpdsl import ast
from hpdsl.check import check_files
from hpdsl.diagnostics import Collector, Diagnostic, Source
from hpdsl.diagnostics.diagnostic import capped
from hpdsl.errors import InputError, SpecError
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
    scope, checked = check(loaded.files)
    collector = Collector([*loaded.diagnostics, *checked])
    diagnostics = capped(collector.sorted())
    registry = None
    if not collector.has_errors:
        warnings = tuple(d for d in diagnostics if not d.is_error)
        registry = Registry(lower(scope, loaded.sources), warnings)
    return CompileResult(registry, diagnostics, {source.name: source for source in loaded.sources})


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def write_registry(registry: Registry, path: str | os.PathLike[str]) -> None:
    """Write registry.json atomically; raise InputError if it cannot be written."""
    write_text_atomic(Path(path), registry.to_json())


def write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` all at once: the old file stays whole if anything fails."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot write '{path}': {(exc.strerror or str(exc)).lower()}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException as exc:
        Path(temp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write '{path}': {(exc.strerror or str(exc)).lower()}") from None
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    # The rename itself is durable only once the folder's entry is on disk;
    # not every platform can open a folder, and the data is already safe.
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


__all__ = ["CompileResult", "bind_model", "check", "check_paths", "check_sources", "compile_paths",
           "compile_sources", "lower", "parse", "write_registry", "write_text_atomic"]


def bind_model(paths: Sequence[str | os.PathLike[str]], model: str | None = None, *,
               stdlib: bool = True) -> CostModel:
    """Compile `paths`, pick `model` (or the only model in scope) and bind it to its profile."""
    from hpdsl.bound.bind import bind
    from hpdsl.diagnostics import did_you_mean

    registry = compile_paths(paths, stdlib=stdlib)
    models = registry.models
    if model is None:
        if len(models) != 1:
            names = ", ".join(sorted(models)) or "none"
            raise InputError(f"{len(models)} models are in scope ({names}); choose one with --model")
        model = next(iter(models))
    if model not in models:
        raise InputError(f"no model '{model}' in scope; {did_you_mean(model, models)}")
    spec = models[model]
    return bind(spec, registry.profiles[spec.profile], families=registry.families)

