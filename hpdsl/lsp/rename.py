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

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs

from hpdsl import ast
from hpdsl.diagnostics import Span
from hpdsl.errors import HpdslError
from hpdsl.lsp.analysis import Analysis, name_at, walk
from hpdsl.lsp.resolve import Target, declaration, resolve
from hpdsl.resources import STDLIB_PREFIX
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


def rename(analysis: Analysis, line: int, col: int, new_name: str, texts: Mapping[Path, str]) -> list[Edit]:
    """Return the edits renaming the kind or profile at a 1-based position; raise RenameError if refused."""
    occurrence = name_at(analysis, line, col)
    target = resolve(occurrence) if occurrence else None
    if target is None or target.what not in ("kind", "profile"):
        raise RenameError("only a kind or a profile can be renamed; put the cursor on its name")
    found = declaration(analysis, target)
    if found is None:
        raise RenameError(f"{target.what} '{target.name}' is not declared in scope")
    if found[1].file.startswith(STDLIB_PREFIX):
        raise RenameError(f"{target.what} '{target.name}' belongs to the standard library, which a rename never "
                          "edits; declare your own and point your models at it")
    _check_new_name(analysis, target, new_name)
    return [Edit(path, span, new_name) for path, span in _references(target, texts)]


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
    """Return the text of every .hpf file under `root` (at most `limit`), open documents as edited."""
    texts: dict[Path, str] = {}
    if root is not None and root.is_dir():
        for path in sorted(root.rglob("*.hpf"))[:limit]:
            try:
                texts[path.resolve()] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
    texts.update({path.resolve(): text for path, text in open_documents.items()})
    return texts


__all__ = ["Edit", "RenameError", "rename", "workspace_texts"]
