"""The fast parser agrees with Lark: shared by tests/syntax/test_fast_parse.py and bench/fuzz.py's `parse-agree`.

`agree` parses one text both ways (hpdsl/syntax/fast.py and Lark alone): where
Lark fails the fast path must defer, and where the fast path answers its
ast.File must equal Lark's in every field of every node, Span fields and
comments included (spans are left out of AST equality, so `differences` walks
both trees). `swap_keywords` writes grammar keywords where names stood, the
corner where Lark's contextual lexer reads a word one way or the other.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import attrs

from hpdsl import ast
from hpdsl.diagnostics import Source
from hpdsl.errors import SpecError
from hpdsl.syntax.fast import fast_parse
from hpdsl.syntax.limits import MAX_FILE_CHARS, MAX_LINE_CHARS
from hpdsl.syntax.parser import lark_parse

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = tuple(sorted(set(re.findall(r'"([a-z_]+)"', (ROOT / "grammar" / "hpdsl.lark").read_text()))))
"""Every keyword of the grammar (`true` and `false` among them)."""

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def fast(source: Source) -> ast.File | None:
    """Parse with the fast path alone: its tree, or None where it defers."""
    return fast_parse(source.name, source.text, MAX_FILE_CHARS, MAX_LINE_CHARS)


def lark(source: Source) -> ast.File | None:
    """Parse with Lark alone: its tree, or None on a syntax error."""
    try:
        return lark_parse(source)
    except SpecError:
        return None


def differences(a: Any, b: Any, path: str = "file") -> list[str]:
    """Return where two values differ, comparing attrs classes field by field, spans included."""
    if type(a) is not type(b):
        return [f"{path}: {a!r} is not {b!r}"]
    if attrs.has(type(a)):
        return [d for f in attrs.fields(type(a))
                for d in differences(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")]
    if isinstance(a, tuple):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items, not {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def agree(source: Source) -> ast.File | None:
    """Assert the fast path defers or builds Lark's tree exactly; return the fast tree."""
    quick, reference = fast(source), lark(source)
    if quick is not None:
        assert reference is not None, f"the fast path accepts what Lark rejects: {source.text!r}"
        found = differences(quick, reference)
        assert found == [], f"the fast path differs from Lark at {found[:3]} in {source.text!r}"
    return quick


def swap_keywords(text: str, rng: random.Random) -> str:
    """Return `text` with one to three of its words replaced by grammar keywords."""
    for _ in range(rng.randint(1, 3)):
        words = list(_WORD.finditer(text))
        if not words:
            break
        word = rng.choice(words)
        text = text[:word.start()] + rng.choice(KEYWORDS) + text[word.end():]
    return text
