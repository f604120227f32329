"""What `hpdsl compile` of the standard library alone reports, kept on disk between runs.

The shipped library is the same every run of one hpdsl: its check (the
outcome, the summary counts, every diagnostic) is stored as a JSON entry of the
cache folder (hpdsl/diskcache.py) under a key hashing every file of the hpdsl
package, the grammar, the shipped .hpf files and Python's version, so any change
to the code or the library misses it. The sources the diagnostics point into are
the shipped files themselves, read for the key, so the entry does not hold them.
A hit imports no checker, parser or IR (bench/bench_startup.py). Only the plain
`hpdsl compile` (no paths, no -o) uses it. An entry is rebuilt from plain values
by shape, and one that does not hold together (counts that disagree with its
diagnostics, an unknown code, a field of the wrong type) is a miss: compiled
again and rewritten (docs/caches.md).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from hpdsl.diagnostics import Diagnostic, Source, Span
from hpdsl.diagnostics.diagnostic import Note
from hpdsl.diskcache import read_entry, write_entry

Report = tuple[bool, dict[str, Any], tuple[Diagnostic, ...], dict[str, Source]]
"""(ok, summary, diagnostics, sources): what the compile command prints from."""

KIND = "stdlib"
_COUNTS = ("files", "errors", "warnings")
_TOTALS = ("profiles", "families", "models")  # None when the library does not compile


class _Malformed(Exception):
    """An entry whose values do not have the shape of a report."""


def stdlib_report(compute: Callable[[], Report]) -> Report:
    """Return the standard library's compile report: from the cache, or computed and stored."""
    found = _key_and_sources()
    if found is None:
        return compute()
    key, sources = found
    cached = _decode(read_entry(KIND, key), sources)
    if cached is not None:
        return cached
    report = compute()
    if dict(report[3]) == sources:  # what a hit would print from: the shipped files as read here
        write_entry(KIND, key, _encode(report))
    return report


def _key_and_sources() -> tuple[str, dict[str, Source]] | None:
    """Return the key of this hpdsl's report and the shipped sources; None where a file cannot be read."""
    from hpdsl.resources import stdlib_files

    code = _code_digest()
    if code is None:
        return None
    digest = hashlib.sha256(code.encode())
    sources = {}
    try:
        for name, path in stdlib_files():
            data = path.read_bytes()
            digest.update(name.encode() + b"\0" + data)
            sources[name] = Source(name, data.decode("utf-8"))
    except (OSError, ValueError):  # a file we cannot read: no key to trust
        return None
    return digest.hexdigest(), sources


@cache
def _code_digest() -> str | None:
    """Return the hash of Python's version, every file of the hpdsl package and the grammar (once a process)."""
    from hpdsl.resources import data_dir

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(repr(sys.version_info[:3]).encode())
    try:
        for part in [*sorted(package.rglob("*.py")), data_dir("grammar") / "hpdsl.lark"]:
            digest.update(str(part.relative_to(part.parents[1])).encode() + b"\0" + part.read_bytes())
    except (OSError, ValueError):
        return None
    return digest.hexdigest()


def _encode(report: Report) -> dict[str, Any]:
    ok, summary, diagnostics, _sources = report
    return {"ok": ok, "summary": summary, "diagnostics": [_diagnostic_data(d) for d in diagnostics]}


def _diagnostic_data(diagnostic: Diagnostic) -> dict[str, Any]:
    return {"span": _span_data(diagnostic.span), "code": diagnostic.code, "message": diagnostic.message,
            "severity": diagnostic.severity, "hint": diagnostic.hint,
            "notes": [[_span_data(note.span), note.message] for note in diagnostic.notes]}


def _span_data(span: Span) -> list[Any]:
    return [span.file, span.line, span.col, span.end_line, span.end_col]


def _decode(data: Any, sources: dict[str, Source]) -> Report | None:
    """Return the report an entry's payload holds, or None if it is not one (or is None)."""
    if data is None:
        return None
    try:
        fields = _exact(data, ("ok", "summary", "diagnostics"))
        ok = _typed(fields["ok"], bool)
        summary = _summary(fields["summary"])
        diagnostics = tuple(_diagnostic(item) for item in _typed(fields["diagnostics"], list))
    except (_Malformed, ValueError):  # ValueError: Diagnostic's own check of its code
        return None
    errors = sum(d.is_error for d in diagnostics)
    consistent = (summary["errors"], summary["warnings"], summary["files"], summary["profiles"] is not None) == (
        errors, len(diagnostics) - errors, len(sources), ok)
    return (ok, summary, diagnostics, dict(sources)) if consistent and ok == (errors == 0) else None


def _summary(data: Any) -> dict[str, Any]:
    fields = _exact(data, (*_COUNTS, *_TOTALS))
    for name in _COUNTS:
        _count(fields[name])
    totals = [fields[name] for name in _TOTALS]
    if totals != [None] * len(totals):
        for value in totals:
            _count(value)
    return {name: fields[name] for name in ("files", *_TOTALS, "errors", "warnings")}


def _diagnostic(data: Any) -> Diagnostic:
    fields = _exact(data, ("span", "code", "message", "severity", "hint", "notes"))
    severity = fields["severity"]
    if severity not in ("error", "warning"):
        raise _Malformed("severity")
    hint = None if fields["hint"] is None else _typed(fields["hint"], str)
    notes = []
    for note in _typed(fields["notes"], list):
        span, message = _pair(note)
        notes.append(Note(_span(span), _typed(message, str)))
    return Diagnostic(_span(fields["span"]), _typed(fields["code"], str), _typed(fields["message"], str),
                      severity, hint, tuple(notes))


def _span(data: Any) -> Span:
    items = _typed(data, list)
    if len(items) != 5:
        raise _Malformed("span")
    file, *numbers = items
    return Span(_typed(file, str), *(_count(number) for number in numbers))


def _pair(data: Any) -> list[Any]:
    items = _typed(data, list)
    if len(items) != 2:
        raise _Malformed("pair")
    return items


def _exact(data: Any, names: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(data, dict) or set(data) != set(names):
        raise _Malformed("fields")
    return data


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise _Malformed("count")
    return value


def _typed(value: Any, kind: type) -> Any:
    if type(value) is not kind:
        raise _Malformed(kind.__name__)
    return value
