"""String tokens and the byte-order mark: shared by both parsers and the formatter, without Lark."""

from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\(.)")
_UNESCAPES = {"n": "\n", "t": "\t"}

BOM = "\ufeff"
"""The UTF-8 byte-order mark as a character: some Windows editors write it at the top of a file."""


def quote(value: str) -> str:
    """Return `value` written as a string token; the inverse of unquote."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'


def unquote(text: str) -> str:
    """Return the value of a string token (quotes removed, escapes resolved)."""
    return _ESCAPE.sub(lambda m: _UNESCAPES.get(m.group(1), m.group(1)), text[1:-1])


def without_bom(text: str) -> str:
    """Return `text` without a leading byte-order mark, which both parsers skip like Python and JSON do.

    The mark is not counted: the first character after it is line 1, column 1.
    """
    return text[1:] if text.startswith(BOM) else text
