"""Diagnostics into a SARIF 2.1.0 log, the format CI code-scanning tools read.

Every code in the code table (hpdsl/diagnostics/codes.py) is a rule whose id is the
code and whose description is its meaning; a diagnostic is a result pointing at its
rule, its span is the region, its notes are related locations and its hint is in the
message and in `properties.hint`. Columns count code points (`columnKind`), which is
what hpdsl's spans count; SARIF's region end column is exclusive, as a Span's is.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import attrs

from hpdsl.diagnostics.codes import CODES
from hpdsl.diagnostics.diagnostic import Diagnostic, Note
from hpdsl.diagnostics.span import Span

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "SRCROOT"
_RULE_INDEX = {code: index for index, code in enumerate(CODES)}


def to_sarif(diagnostics: Iterable[Diagnostic], *, version: str, root: Path,
             failure: Failure | None = None) -> dict[str, Any]:
    """Return the SARIF 2.1.0 log of one hpdsl run over `diagnostics` (paths relative to `root`).

    With `failure` (a file that cannot be read, an output that must not be written) the run did
    not complete: its invocation says so, with the error as a tool execution notification.
    """
    results = [_result(d, root) for d in diagnostics]
    run = {
        "tool": {"driver": {
            "name": "hpdsl",
            "version": version,
            "rules": [_rule(code, meaning) for code, meaning in CODES.items()],
        }},
        "originalUriBaseIds": {SRCROOT: {"uri": root.resolve().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": results,
        "invocations": [_invocation(failure)],
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


@attrs.frozen
class Failure:
    """Why a run stopped before it checked everything: the message, its detail lines, the exit code."""

    message: str
    details: tuple[str, ...] = ()
    exit_code: int = 2


def _invocation(failure: Failure | None) -> dict[str, Any]:
    if failure is None:
        return {"executionSuccessful": True}
    text = "\n".join((failure.message, *failure.details))
    return {"executionSuccessful": False, "exitCode": failure.exit_code,
            "toolExecutionNotifications": [{"level": "error", "message": {"text": text}}]}


def _rule(code: str, meaning: str) -> dict[str, Any]:
    return {
        "id": code,
        "name": "".join(part.capitalize() for part in code.split("-")),
        "shortDescription": {"text": meaning},
        "fullDescription": {"text": meaning},
        "help": {"text": f"{code}: {meaning} (docs/diagnostics.md)"},
    }


def _result(diagnostic: Diagnostic, root: Path) -> dict[str, Any]:
    text = diagnostic.message + (f"\nhint: {diagnostic.hint}" if diagnostic.hint else "")
    result: dict[str, Any] = {
        "ruleId": diagnostic.code,
        "ruleIndex": _RULE_INDEX[diagnostic.code],
        "level": diagnostic.severity,
        "message": {"text": text},
        "locations": [_location(diagnostic.span, root)],
    }
    if diagnostic.notes:
        result["relatedLocations"] = [_related(index, note, root)
                                      for index, note in enumerate(diagnostic.notes)]
    if diagnostic.hint:
        result["properties"] = {"hint": diagnostic.hint}
    return result


def _related(index: int, note: Note, root: Path) -> dict[str, Any]:
    return {"id": index, **_location(note.span, root), "message": {"text": note.message}}


def _location(span: Span, root: Path) -> dict[str, Any]:
    return {"physicalLocation": {
        "artifactLocation": _artifact(span.file, root),
        "region": {"startLine": span.line, "startColumn": span.col,
                   "endLine": span.end_line, "endColumn": max(span.end_col, span.col)},
    }}


def _artifact(file: str, root: Path) -> dict[str, Any]:
    """Return a relative URI under SRCROOT for files below `root`, else an absolute file URI."""
    path = Path(file)
    if not path.is_absolute():
        return {"uri": quote(PurePosixPath(*path.parts).as_posix()), "uriBaseId": SRCROOT}
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError:
        return {"uri": path.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": SRCROOT}
