"""Formatting: the document's canonical text, exactly as `hpdsl fmt` prints it."""

from __future__ import annotations

from hpdsl.diagnostics import Source
from hpdsl.errors import SpecError
from hpdsl.fmt import format_source


def formatted(name: str, text: str) -> str | None:
    """Return the canonical text of a document (None when it does not parse, or is canonical)."""
    try:
        canonical = format_source(Source(name, text))
    except SpecError:
        return None
    return None if canonical == text else canonical
