"""Writing a string token: shared by the transformer and the formatter, without the parser."""

from __future__ import annotations


def quote(value: str) -> str:
    """Return `value` written as a string token; the inverse of unquote."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'
