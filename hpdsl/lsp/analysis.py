"""One document checked as `hpdsl compile` checks it, with an index of every name in scope.

The document is compiled with its imports and the standard library (the same
loader and checker as the CLI, so diagnostics are identical); every parsed file's
declarations are indexed by name, and the document's names are listed with the
AST nodes that hold them, so a position resolves to what it names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import attrs

from hpdsl import ast
from hpdsl.api import check, lower
from hpdsl.diagnostics import Collector, Diagnostic, Source, Span
from hpdsl.loader import MAX_FILE_BYTES, Loaded, load_sources
from hpdsl.registry import Registry
from hpdsl.files import read_text
from hpdsl.resources import STDLIB_PREFIX, stdlib_files


class Superseded(Exception):
    """A check that a newer edit of its document overtook (the server drops it unpublished)."""


@attrs.frozen
class Occurrence:
    """A name in the document and the chain of AST nodes around it (innermost last)."""

    name: ast.Name
    parents: tuple[Any, ...]

    @property
    def parent(self) -> Any:
        """Return the node that holds the name."""
        return self.parents[-1]


@attrs.frozen
class Analysis:
    """A checked document: diagnostics, registry (when error-free), parsed files and the name index.

    `paths` maps every source's name (what spans carry) to its file, `texts` to the
    text that was checked (an open buffer's, else the disk's): positions are
    converted in that text.
    """

    name: str
    text: str
    diagnostics: tuple[Diagnostic, ...]
    lowering: Callable[[], Registry] | None
    files: tuple[ast.File, ...]
    paths: dict[str, Path]
    texts: dict[str, str] = attrs.field(factory=dict)
    library: frozenset[str] = frozenset()
    _lowered: list[Registry] = attrs.field(factory=list, eq=False, repr=False)

    @property
    def registry(self) -> Registry | None:
        """Return the lowered registry (None while there are errors), lowered on first use.

        Diagnostics need no registry, so an edit is published without lowering;
        hover lowers once per analysis.
        """
        if self.lowering is None:
            return None
        if not self._lowered:
            self._lowered.append(self.lowering())
        return self._lowered[0]

    def in_library(self, name: str) -> bool:
        """Return whether a source name is a standard-library file (never edited, never published)."""
        return name in self.library or name.startswith(STDLIB_PREFIX)

    @property
    def document(self) -> ast.File | None:
        """Return the document's own AST (None when it does not parse)."""
        return next((f for f in self.files if f.path == self.name), None)

    def declarations(self, kind: type) -> Iterator[tuple[Any, ast.File]]:
        """Yield every top-level declaration of one AST class in scope, with its file."""
        for file in self.files:
            for item in file.items:
                if isinstance(item, kind):
                    yield item, file

    def path_of(self, span: Span) -> Path:
        """Return the file on disk a span's file name stands for."""
        return self.paths.get(span.file) or Path(span.file).resolve()

    def closure(self) -> dict[str, Path]:
        """Return the document and every user file it imports (not the standard library), by name."""
        return {name: path for name, path in self.paths.items() if not self.in_library(name)}


def analyse(path: Path, text: str, overlay: Mapping[Path, str] | None = None,
            superseded: Callable[[], bool] = lambda: False) -> Analysis:
    """Check one document (named by its absolute path) with its imports and the standard library.

    An imported file that `overlay` holds (an open buffer) is checked as the
    overlay has it, not as on disk. `superseded` is asked between the phases;
    when it says yes, Superseded is raised and nothing more is done. The
    registry is lowered only when asked for (Analysis.registry).
    """
    library = _library()
    loaded = _load(path, text, overlay or {}, library)
    _phase(superseded)
    scope, checked = check(loaded.files)
    collector = Collector([*loaded.diagnostics, *checked])
    _phase(superseded)
    lowering = None if collector.has_errors else (lambda: Registry(lower(scope, loaded.sources)))
    texts = {source.name: source.text for source in loaded.sources}
    return Analysis(str(path), text, collector.sorted(), lowering, loaded.files, dict(loaded.paths), texts,
                    frozenset(source.name for source in library))


def _phase(superseded: Callable[[], bool]) -> None:
    if superseded():
        raise Superseded()


def _load(path: Path, text: str, overlay: Mapping[Path, str], library: list[Source]) -> Loaded:
    """Load the document; then again with every open buffer its imports reach, until none is new.

    The standard library is given as sources named by their paths: the parser
    remembers a parse by name and text (hpdsl/syntax/parser.py), so a re-check
    reuses the library's parse from memory instead of its disk cache entry.
    """
    sources = {Path(source.name): source for source in library}
    sources[path] = Source(str(path), text)
    while True:
        loaded = load_sources(list(sources.values()), stdlib=True)
        reached = [p for name, p in loaded.paths.items()
                   if p in overlay and p not in sources and not name.startswith(STDLIB_PREFIX)]
        if not reached:
            return loaded
        sources.update({p: Source(str(p), overlay[p]) for p in reached})


def _library() -> list[Source]:
    """Return the standard library's files as sources named by their resolved paths (re-read when changed)."""
    out = []
    for file in _library_paths():
        try:
            info = file.stat()
            out.append(_library_source(file, info.st_mtime_ns, info.st_size))
        except (OSError, UnicodeDecodeError):
            continue  # the loader reports an unreadable library file itself
    return out


@lru_cache(maxsize=1)
def _library_paths() -> tuple[Path, ...]:
    return tuple(file.resolve() for _, file in stdlib_files())


@lru_cache(maxsize=256)
def _library_source(path: Path, _mtime: int, _size: int) -> Source:
    return Source(str(path), read_text(path, limit=MAX_FILE_BYTES))


def walk(node: Any, parents: tuple[Any, ...] = ()) -> Iterator[Occurrence]:
    """Yield every Name below an AST node, with the nodes that enclose it."""
    if isinstance(node, ast.Name):
        yield Occurrence(node, parents)
        return
    if isinstance(node, tuple):
        for child in node:
            yield from walk(child, parents)
        return
    if not attrs.has(type(node)):
        return
    for field in attrs.fields(type(node)):
        if field.name not in ("span", "comments"):
            yield from walk(getattr(node, field.name), (*parents, node))


def contains(span: Span, line: int, col: int) -> bool:
    """Return whether a span holds a 1-based position (its end column included, for a cursor after it)."""
    after_start = (line, col) >= (span.line, span.col)
    before_end = (line, col) <= (span.end_line, span.end_col)
    return after_start and before_end


def name_at(analysis: Analysis, line: int, col: int) -> Occurrence | None:
    """Return the name under a 1-based position of the document, if any."""
    document = analysis.document
    if document is None:
        return None
    return next((o for o in walk(document) if contains(o.name.span, line, col)), None)


def enclosing(occurrence: Occurrence, kind: type) -> Any:
    """Return the innermost node of a class around an occurrence (None if there is none)."""
    return next((p for p in reversed(occurrence.parents) if isinstance(p, kind)), None)
