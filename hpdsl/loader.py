"""Paths and texts into the Sources and parsed files of one compilation.

A folder stands for every `*.hpf` file below it (sorted, hidden folders
skipped); `import "x.hpf"` pulls in a file relative to the importing one. Each
file is loaded once, by resolved path, so a file both given and imported, or a
standard-library file also named on the command line, is read one time. The
standard library comes first, so a duplicate declaration is reported at the
user's copy.

Reading is bounded (docs/trust.md#hostile-input): only regular files are read (a FIFO,
device or folder is refused without blocking on it), at most MAX_FILE_BYTES each.
An import must resolve inside the project: the folders of the files and folders
given, the standard library, or a search path the caller passes; only `.hpf`
files are imported, so a diagnostic never echoes another file's lines. The
caller may lift the confinement (`allow_any_import`, the CLI's
`--allow-any-import`).

Display names (what diagnostics print) are paths relative to the working
directory when possible, else the path as given; standard-library files keep
their `<hpdsl>/...` names unless the user named them too. A path that cannot be
read is an InputError (usage), an import that cannot be read a diagnostic.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import attrs

from hpdsl import ast
from hpdsl.diagnostics import Collector, Diagnostic, Source
from hpdsl.errors import InputError, SpecError
from hpdsl.files import read_text, reason
from hpdsl.resources import STDLIB_FOLDERS, STDLIB_PREFIX, data_dir, stdlib_files
from hpdsl.syntax import parse_source

SUFFIX = ".hpf"

# The largest file read: far above any real spec (the shipped ones are under 4 KiB), small enough
# to parse, check and format in under a second (at 1 MiB, formatting took 3 s of CPU: bench/fuzz.py).
MAX_FILE_BYTES = 1 << 18

# The longest chain of imports followed (a imports b imports c ...): the walk is
# depth-first and recursive, and every file of a chain is open in it at once.
MAX_IMPORT_DEPTH = 64


@attrs.frozen
class Loaded:
    """What loading produced: every source read, the files that parsed, the diagnostics."""

    sources: tuple[Source, ...]
    files: tuple[ast.File, ...]
    diagnostics: tuple[Diagnostic, ...]
    paths: dict[str, Path] = attrs.field(factory=dict)

    def stable_names(self) -> dict[str, str]:
        """Return each source's name as registry.json records it: the same wherever it is compiled.

        Standard-library files keep `<hpdsl>/...`; the others are named relative to
        the common folder of them all (resolved), so a copy of the project in another
        folder, or reached through a symlink, compiles to the same bytes.
        """
        own = {name: path for name, path in self.paths.items() if not name.startswith(STDLIB_PREFIX)}
        if not own:
            return {}
        root = Path(os.path.commonpath([path.parent for path in own.values()]))
        return {name: path.relative_to(root).as_posix() for name, path in own.items()}


# --------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Return the .hpf files the given files and folders stand for; raise InputError if one is missing."""
    files: dict[Path, Path] = {}
    for given in paths:
        path = Path(given)
        try:
            path.stat()
        except OSError as exc:  # a name too long, a symlink loop: not just "missing"
            if not isinstance(exc, FileNotFoundError):
                raise InputError(f"'{os.fspath(given)[:200]}': {_reason(exc)}") from None
        if path.is_dir():
            found = _hpf_below(path)
            if not found:
                raise InputError(f"no {SUFFIX} files in the folder '{os.fspath(given)}'")
        elif path.is_file():
            found = [path]
        elif path.exists():
            raise InputError(f"'{os.fspath(given)}' is not a regular file or a folder")
        else:
            raise InputError(f"'{os.fspath(given)}': no such file or folder")
        for file in found:
            files.setdefault(_resolved(file, given), file)
    return list(files.values())


def _is_dir(path: Path) -> bool:
    """Return whether `path` is a folder; False where it cannot even be asked (a name too long)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _resolved(path: Path, given: str | os.PathLike[str]) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        raise InputError(f"'{os.fspath(given)}': a symbolic link loop") from None


def _hpf_below(folder: Path) -> list[Path]:
    # Hidden folders (.git, .venv, .hypothesis) hold no specs of the user's.
    return sorted(path for path in folder.rglob(f"*{SUFFIX}")
                  if path.is_file() and not any(part.startswith(".")
                                                for part in path.relative_to(folder).parts[:-1]))


def display_name(path: Path) -> str:
    """Return how diagnostics name `path`: relative to the working directory when possible."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return Path(os.path.normpath(path)).as_posix()


def read_source(path: Path, name: str | None = None) -> Source:
    """Read one .hpf file as a Source; raise InputError if it cannot be read."""
    shown = name or display_name(path)
    try:
        return Source(shown, _read(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read '{shown}': {_reason(exc)}") from None


def _stdlib_source(path: Path, name: str) -> Source:
    """Read a standard-library file, remembered while its size and modification time stay the same."""
    try:
        info = path.stat()
    except OSError:
        return read_source(path, name)  # read_source says why
    return _remembered_source(path, name, info.st_mtime_ns, info.st_size)


@lru_cache(maxsize=256)
def _remembered_source(path: Path, name: str, _mtime: int, _size: int) -> Source:
    return read_source(path, name)


def _read(path: Path) -> str:
    """Read a regular .hpf file of at most MAX_FILE_BYTES as UTF-8 (hpdsl/files.py)."""
    return read_text(path, limit=MAX_FILE_BYTES)


_reason = reason


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------


@attrs.frozen
class ImportPolicy:
    """Where imports may lead: below `folders` (with the project's own), or anywhere if `anywhere`."""

    folders: tuple[Path, ...] = ()
    anywhere: bool = False

    def with_project(self, folders: Iterable[Path]) -> ImportPolicy:
        """Return the policy with the project's folders and the standard library's added."""
        shipped = (data_dir(name).resolve() for name in STDLIB_FOLDERS)
        extra = tuple(folder.resolve() for folder in self.folders)
        return ImportPolicy((*folders, *shipped, *extra), self.anywhere)

    def allows(self, target: Path) -> bool:
        """Return whether an import may read `target` (a resolved path)."""
        return self.anywhere or any(target.is_relative_to(folder) for folder in self.folders)


def load_paths(paths: Sequence[str | os.PathLike[str]], *, stdlib: bool = True,
               imports: ImportPolicy = ImportPolicy()) -> Loaded:
    """Load the given files and folders, their imports and (unless stdlib=False) the standard library."""
    roots = [(_resolved(path, path), read_source(path)) for path in expand_paths(paths)]
    project = [_resolved(Path(p), p) if Path(p).is_dir() else _resolved(Path(p), p).parent
               for p in paths]
    return _Loader(policy=imports.with_project(project)).run(roots, stdlib=stdlib)


def load_sources(sources: Sequence[Source], *, stdlib: bool = True,
                 imports: ImportPolicy = ImportPolicy()) -> Loaded:
    """Load in-memory sources (named by path), their imports and (unless stdlib=False) the standard library."""
    roots: dict[Path, Source] = {}
    for source in sources:
        key = Path(source.name).resolve()
        if key in roots and roots[key] != source:
            raise InputError(f"two different sources are named '{source.name}'")
        roots[key] = source
    project = [key.parent for key in roots]
    return _Loader(policy=imports.with_project(project)).run(list(roots.items()), stdlib=stdlib)


@attrs.define
class _Loader:
    """One loading run: a depth-first walk over imports that remembers what it has read."""

    given: dict[Path, Source] = attrs.field(factory=dict)
    names: dict[Path, str] = attrs.field(factory=dict)
    stack: list[Path] = attrs.field(factory=list)
    sources: list[Source] = attrs.field(factory=list)
    files: list[ast.File] = attrs.field(factory=list)
    collector: Collector = attrs.field(factory=Collector)
    policy: ImportPolicy = ImportPolicy()

    def run(self, roots: list[tuple[Path, Source]], *, stdlib: bool) -> Loaded:
        """Load the standard library (if asked), then `roots`, then everything they import."""
        self.given = dict(roots)
        order = [*self._stdlib_roots(), *roots] if stdlib else roots
        for key, source in order:
            self._visit(key, source)
        return Loaded(tuple(self.sources), tuple(self.files), self.collector.sorted(),
                      {name: key for key, name in self.names.items()})

    def _stdlib_roots(self) -> list[tuple[Path, Source]]:
        roots = []
        for name, path in stdlib_files():
            key = path.resolve()
            # A standard file the user also named keeps the user's name.
            roots.append((key, self.given.get(key) or _stdlib_source(path, name)))
        return roots

    def _visit(self, key: Path, source: Source) -> None:
        if key in self.names:
            return
        self.names[key] = source.name
        self.sources.append(source)
        try:
            file = parse_source(source)
        except SpecError as error:
            self.collector.extend(error.diagnostics)
            return
        self.files.append(file)
        self.stack.append(key)
        for item in file.items:
            if isinstance(item, ast.ImportDecl):
                self._import(item, key)
        self.stack.pop()

    def _import(self, decl: ast.ImportDecl, importer: Path) -> None:
        try:
            target = (importer.parent / str(decl.path.value)).resolve()
        except (OSError, ValueError, RuntimeError):  # a NUL byte, a symlink loop
            self._report_missing(decl, "it is not a usable file path (or a symbolic link loop)")
            return
        if not self.policy.allows(target):
            self._report_outside(decl)
            return
        if target in self.stack:
            self._report_cycle(decl, target)
            return
        if target in self.names:
            return
        if len(self.stack) >= MAX_IMPORT_DEPTH:
            self._report_too_deep(decl)
            return
        source = self.given.get(target) or self._read_import(decl, target)
        if source is not None:
            self._visit(target, source)

    def _read_import(self, decl: ast.ImportDecl, target: Path) -> Source | None:
        name = display_name(target)
        if target.suffix != SUFFIX and not _is_dir(target):
            # Only .hpf source is read: a diagnostic must never echo another file's lines.
            self._report_missing(decl, f"'{name}' is not a {SUFFIX} file")
            return None
        try:
            return Source(name, _read(target))
        except (OSError, UnicodeDecodeError) as exc:
            self._report_missing(decl, f"'{name}' {_import_problem(exc)}")
            return None

    def _report_missing(self, decl: ast.ImportDecl, problem: str) -> None:
        self.collector.error(
            decl.path.span, "import-not-found", f"cannot import {decl.path.value!r}: {problem}",
            hint="an import path is relative to the folder of the file that imports it")

    def _report_outside(self, decl: ast.ImportDecl) -> None:
        self.collector.error(
            decl.path.span, "import-outside-project",
            f"cannot import {decl.path.value!r}: it leads outside the project (the folders of the "
            "files compiled, the standard library and the search paths given)",
            hint="move the file into the project, pass its folder as a search path "
                 "(`--import-path DIR`), or allow any import with `--allow-any-import`")

    def _report_too_deep(self, decl: ast.ImportDecl) -> None:
        self.collector.error(
            decl.path.span, "import-too-deep",
            f"cannot import {decl.path.value!r}: it is the {len(self.stack) + 1}th file of a chain of "
            f"imports, more than the {MAX_IMPORT_DEPTH} the compiler follows",
            hint="import the files from one file (or name them on the command line) instead of "
                 "chaining them")

    def _report_cycle(self, decl: ast.ImportDecl, target: Path) -> None:
        chain = self.stack[self.stack.index(target):] + [target]
        self.collector.error(decl.path.span, "import-cycle",
                             "files import each other in a cycle: "
                             + " -> ".join(self.names[key] for key in chain),
                             hint="remove one of these imports; files in one compilation "
                                  "already see each other's declarations")


def _import_problem(exc: OSError | UnicodeDecodeError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "does not exist"
    if isinstance(exc, IsADirectoryError) or "a folder" in str(exc):
        return "is a folder, not a file"
    return f"cannot be read: {_reason(exc)}"
