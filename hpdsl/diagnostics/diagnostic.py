"""The Diagnostic value, and the collector every check reports into."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import attrs

from hpdsl.diagnostics.codes import CODES
from hpdsl.diagnostics.span import Span

Severity = Literal["error", "warning"]


@attrs.frozen
class Note:
    """A secondary location that explains a diagnostic (e.g. the first declaration)."""

    span: Span
    message: str


@attrs.frozen
class Diagnostic:
    """One finding: where, how bad, which stable code, what was found and how to fix it."""

    span: Span
    code: str
    message: str
    severity: Severity = "error"
    hint: str | None = None
    notes: tuple[Note, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"diagnostic code {self.code!r} is not in the code table")

    @property
    def is_error(self) -> bool:
        """Return whether this diagnostic fails the compilation."""
        return self.severity == "error"

    def to_json(self) -> dict[str, Any]:
        """Return the diagnostic as the object `--json` prints."""
        data: dict[str, Any] = {
            "file": self.span.file,
            "line": self.span.line,
            "col": self.span.col,
            "end_line": self.span.end_line,
            "end_col": self.span.end_col,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
        }
        if self.hint:
            data["hint"] = self.hint
        return data


def sort_key(diagnostic: Diagnostic) -> tuple[str, int, int, str]:
    """Order diagnostics by file, position and code, so output is deterministic."""
    span = diagnostic.span
    return (span.file, span.line, span.col, diagnostic.code)


@attrs.define
class Collector:
    """Collects the diagnostics of one run; checks report here and never raise."""

    diagnostics: list[Diagnostic] = attrs.field(factory=list)

    def error(self, span: Span, code: str, message: str, *, hint: str | None = None,
              notes: tuple[Note, ...] = ()) -> None:
        """Report an error."""
        self.diagnostics.append(Diagnostic(span, code, message, "error", hint, notes))

    def warning(self, span: Span, code: str, message: str, *, hint: str | None = None,
                notes: tuple[Note, ...] = ()) -> None:
        """Report a warning (compilation still succeeds)."""
        self.diagnostics.append(Diagnostic(span, code, message, "warning", hint, notes))

    def extend(self, diagnostics: Any) -> None:
        """Add diagnostics found elsewhere."""
        self.diagnostics.extend(diagnostics)

    @property
    def has_errors(self) -> bool:
        """Return whether any error (not only warnings) was reported."""
        return any(d.is_error for d in self.diagnostics)

    def sorted(self) -> tuple[Diagnostic, ...]:
        """Return the diagnostics, deduplicated, in file and position order."""
        unique = dict.fromkeys(self.diagnostics)
        return tuple(sorted(unique, key=sort_key))


# A file with more problems than this is broken throughout; more lines would only
# bury the first ones (and a hostile file could print without bound).
MAX_PER_FILE = 100


def capped(diagnostics: Iterable[Diagnostic], most: int = MAX_PER_FILE) -> tuple[Diagnostic, ...]:
    """Return sorted diagnostics with at most `most` per file, then one that counts the rest."""
    kept: list[Diagnostic] = []
    dropped: dict[str, list[Diagnostic]] = {}
    shown: dict[str, int] = {}
    for diagnostic in diagnostics:
        file = diagnostic.span.file
        if shown.get(file, 0) < most:
            shown[file] = shown.get(file, 0) + 1
            kept.append(diagnostic)
        else:
            dropped.setdefault(file, []).append(diagnostic)
    for file, rest in dropped.items():
        severity: Severity = "error" if any(d.is_error for d in rest) else "warning"
        kept.append(Diagnostic(rest[0].span, "too-many-diagnostics",
                               f"{len(rest):,} more problems in {file} are not shown", severity,
                               hint="fix the ones shown first, then compile again"))
    return tuple(sorted(kept, key=sort_key))
