"""Rename a kind or a profile everywhere the workspace names it.

The name under the cursor is resolved as go-to-definition resolves it; every
`.hpf` file of the workspace (the open documents as edited, the others as on
disk) is parsed and each name in it that resolves to the same profile, or to
the same kind of the same profile, is rewritten. The standard library is never
edited: renaming something it declares is refused, as is a new name that is not
an identifier or that the profile (for a kind) or the workspace (for a profile)
already uses.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs

from hpdsl import ast
from hpdsl.diagnostics import Span
from hpdsl.errors import HpdslError
from hpdsl.files import read_text
from hpdsl.loader import MAX_FILE_BYTES
from hpdsl.lsp.analysis import Analysis, Occurrence, name_at, walk
from hpdsl.lsp.resolve import Target, declaration, resolve
from hpdsl.syntax import parse_text

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@attrs.frozen(auto_exc=True)
class RenameError(HpdslError):
    """A rename the server refuses, with the reason shown to the user."""


@attrs.frozen
class Edit:
    """Replace the name at `span` of the file at `path` with `text`."""

    path: Path
    span: Span
    text: str


def renamable(analysis: Analysis, line: int, col: int) -> Occurrence:
    """Return the kind or profile name at a 1-based position that a rename may change; raise RenameError if none."""
    occurrence = name_at(analysis, line, col)
    target = resolve(occurrence) if occurrence else None
    if occurrence is None or target is None or target.what not in ("kind", "profile"):
        raise RenameError("only a kind or a profile can be renamed; put the cursor on its name")
    found = declaration(analysis, target)
    if found is None:
        raise RenameError(f"{target.what} '{target.name}' is not declared in scope")
    if analysis.in_library(found[1].file):
        raise RenameError(f"{target.what} '{target.name}' belongs to the standard library, which a rename never "
                          "edits; declare your own and point your models at it")
    return occurrence


def rename(analysis: Analysis, line: int, col: int, new_name: str, texts: Mapping[Path, str]) -> list[Edit]:
    """Return the edits renaming the kind or profile at a 1-based position; raise RenameError if refused."""
    target = resolve(renamable(analysis, line, col))
    assert target is not None
    _check_new_name(analysis, target, new_name)
    return [Edit(path, span, new_name) for path, span in _references(target, texts)]


def references(analysis: Analysis, line: int, col: int, texts: Mapping[Path, str], *,
               declaration: bool = True) -> list[Edit]:
    """Return every name in `texts` meaning what the name at a 1-based position means (as edits to itself)."""
    occurrence = name_at(analysis, line, col)
    target = resolve(occurrence) if occurrence else None
    if target is None:
        return []
    declared = _declared_at(analysis, target)
    return [Edit(path, span, str(target.name)) for path, span in _references(target, texts)
            if declaration or (path, (span.line, span.col)) != declared]


def _declared_at(analysis: Analysis, target: Target) -> tuple[Path, tuple[int, int]] | None:
    found = declaration(analysis, target)
    if found is None:
        return None
    return analysis.path_of(found[1]), (found[1].line, found[1].col)


def _check_new_name(analysis: Analysis, target: Target, new_name: str) -> None:
    if not _IDENTIFIER.fullmatch(new_name):
        raise RenameError(f"'{new_name}' is not a name: use letters, digits and underscores, not starting "
                          "with a digit")
    taken = declaration(analysis, Target(target.what, new_name, target.owner))
    if taken is not None and (target.what == "profile" or _kind_owner(taken[0], analysis) == target.owner):
        raise RenameError(f"{target.what} '{new_name}' already exists; choose another name")


def _kind_owner(kind: object, analysis: Analysis) -> str | None:
    for profile, _ in analysis.declarations(ast.Profile):
        if any(item is kind for item in profile.items):
            return str(profile.name.value)
    return None


def _references(target: Target, texts: Mapping[Path, str]) -> Iterator[tuple[Path, Span]]:
    """Yield every name in the workspace's files that resolves to the target."""
    for path, text in texts.items():
        try:
            file = parse_text(text, str(path))
        except HpdslError:
            continue  # a file that does not parse has no names to rename
        for occurrence in walk(file):
            found = resolve(occurrence)
            if found is not None and found.what == target.what and found.name == target.name \
                    and (target.what == "profile" or found.owner == target.owner):
                yield path, occurrence.name.span


def workspace_texts(root: Path | None, open_documents: Mapping[Path, str], *, limit: int = 2000
                    ) -> dict[Path, str]:
    """Return the text of every .hpf file under `root` (at most `limit`), open documents as edited.

    Files are read through hpdsl's safe reader (a FIFO, a device or a link to one,
    or a file over the loader's cap is skipped, never waited on); folders are
    walked without following links, hidden ones skipped.
    """
    texts: dict[Path, str] = {}
    for path in _hpf_files(root, limit) if root is not None else ():
        try:
            texts[path.resolve()] = read_text(path, limit=MAX_FILE_BYTES)
        except (OSError, UnicodeDecodeError, RuntimeError):
            continue
    texts.update({path.resolve(): text for path, text in open_documents.items()})
    return texts


def _hpf_files(root: Path, limit: int) -> list[Path]:
    found: list[Path] = []
    folders = 0
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        found.extend(Path(folder) / name for name in sorted(files) if name.endswith(".hpf"))
        folders += 1
        if len(found) >= limit or folders >= 5 * limit:  # a root of / or ~ must not take minutes
            break
    return found[:limit]


__all__ = ["Edit", "RenameError", "references", "renamable", "rename", "workspace_texts"]
