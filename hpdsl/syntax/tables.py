"""The grammar's LALR tables: built once by the developers, shipped read-only beside the grammar.

Lark's own `cache=` pickles the parser into the user's cache folder, where a
planted file would run code on the next parse. Instead the parser is written as
plain JSON (Lark's `memo_serialize`: dicts, lists, strings and numbers, objects
named only from Lark's fixed namespaces, no pickle) to grammar/hpdsl.tables.json,
which the wheel ships inside the package with the grammar (pyproject.toml). It
records the hash of what shapes the tables (the grammar text and the parser's
options) and Lark's version; loading it takes about a tenth of building the
parser (docs/caches.md). A missing, damaged or stale file, or another Lark,
builds the parser from the grammar in memory instead: slower, never different,
and nothing is written anywhere. `python -m hpdsl.syntax.rebuild_tables` rewrites the
file after a grammar change (tests/syntax/test_tables.py fails until it is).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import lark
from lark import Lark
from lark.grammar import Rule
from lark.lexer import TerminalDef

from hpdsl.files import read_text
from hpdsl.resources import data_dir

TABLES_NAME = "hpdsl.tables.json"
FORMAT = 1
MAX_TABLES_BYTES = 4 << 20
"""Far above the tables' size (about 160 KB): a larger file is not ours."""

_INT_KEYS = "__int_keys__"  # JSON keys are strings; Lark's state and memo tables are keyed by int
_UNSAVED = ("lexer_callbacks", "edit_terminals")  # functions: passed again (or applied already)


def grammar_text() -> str:
    """Return the text of the shipped grammar."""
    return (data_dir("grammar") / "hpdsl.lark").read_text(encoding="utf-8")


def tables_key(grammar: str, options: dict[str, Any], salt: str) -> str:
    """Return the hash of what shapes the tables: the grammar, the saved options and `salt`."""
    saved = {name: value for name, value in sorted(options.items()) if name not in _UNSAVED}
    return hashlib.sha256(f"{grammar}\0{saved!r}\0{salt}".encode()).hexdigest()


def tables_path() -> Path:
    """Return where the shipped tables are."""
    return data_dir("grammar") / TABLES_NAME


def load_parser(grammar: str, options: dict[str, Any], salt: str, path: Path | None = None) -> Lark:
    """Return the parser from the shipped tables (or `path`) when they match, else built from the grammar."""
    tables = _shipped(path or tables_path(), tables_key(grammar, options, salt))
    if tables is not None:
        loaded = {name: options[name] for name in ("lexer_callbacks",) if name in options}
        try:
            return Lark._load_from_dict(tables["data"], tables["memo"], **loaded)
        except Exception:  # noqa: BLE001 - tables Lark cannot read are no tables: build instead
            pass
    return Lark(grammar, **options)


def _shipped(path: Path, key: str) -> dict[str, Any] | None:
    """Return the tables at `path` if they are well formed and made for `key` and this Lark."""
    try:
        text = read_text(path, limit=MAX_TABLES_BYTES)
        found = json.loads(text, object_hook=_int_keys)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, TypeError):
        return None
    if not isinstance(found, dict) or (found.get("format"), found.get("key"), found.get("lark")) != (
            FORMAT, key, lark.__version__):
        return None
    if not isinstance(found.get("data"), dict) or not isinstance(found.get("memo"), dict):
        return None
    return found


def tables_json(parser: Lark, key: str) -> str:
    """Return the tables of `parser` as the text of the shipped file."""
    data, memo = parser.memo_serialize([TerminalDef, Rule])
    data["options"] = {name: value for name, value in data["options"].items() if name not in _UNSAVED}
    document = {"format": FORMAT, "key": key, "lark": lark.__version__, "data": data, "memo": memo}
    return json.dumps(_with_int_keys(document), sort_keys=True, separators=(",", ":")) + "\n"


def _with_int_keys(node: Any) -> Any:
    if isinstance(node, dict):
        if node and all(isinstance(key, int) and not isinstance(key, bool) for key in node):
            return {_INT_KEYS: [[key, _with_int_keys(value)] for key, value in node.items()]}
        return {key: _with_int_keys(value) for key, value in node.items()}
    if isinstance(node, (list, tuple)):
        return [_with_int_keys(value) for value in node]
    return node


def _int_keys(node: dict[str, Any]) -> Any:
    if len(node) == 1 and _INT_KEYS in node:
        return {int(key): value for key, value in node[_INT_KEYS]}
    return node
