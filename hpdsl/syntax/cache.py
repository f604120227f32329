"""The standard library's parses kept on disk, so a warm `hpdsl compile` needs no parser at all.

A shipped .hpf file (named `<hpdsl>/...`, hpdsl/resources.py) parses to the
same frozen AST every run; it is stored pickled in the cache folder the
grammar's LALR tables use (hpdsl/resources.py `cache_folder`), under a key that
hashes the file's name and text with everything that shapes its AST: the
grammar, hpdsl/ast.py and hpdsl/syntax/'s code, Python's version. Reading it
back skips importing Lark and parsing. Only the shipped files are stored
(a bounded set: user files and generated text never fill the folder); a
read-only, missing or damaged cache is ignored, and a miss parses as usual.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
import tempfile
from functools import cache
from pathlib import Path

from hpdsl import ast
from hpdsl.diagnostics import Source
from hpdsl.resources import STDLIB_PREFIX, cache_folder, data_dir

_CODE = ("ast.py", "syntax/parser.py", "syntax/transformer.py", "syntax/text.py", "syntax/cache.py",
         "syntax/fast.py", "syntax/fast_family.py", "syntax/fast_tokens.py")


def parse_source(source: Source) -> ast.File:
    """Parse a Source into an ast.File (a shipped file: from the disk cache when it holds it)."""
    path = _entry(source) if source.name.startswith(STDLIB_PREFIX + "/") else None
    if path is not None:
        found = _read(path)
        if found is not None and found.path == source.name:
            return found
    from hpdsl.syntax.parser import parse_source as parse

    file = parse(source)
    if path is not None:
        _write(path, file)
    return file


def parse_text(text: str, name: str = "<string>") -> ast.File:
    """Parse one .hpf text; raise SpecError carrying the syntax diagnostic."""
    return parse_source(Source(name, text))


@cache
def _code_key() -> str:
    """Return the hash of what shapes a parse: the grammar, the AST and parser code, Python."""
    digest = hashlib.sha256(repr(sys.version_info[:3]).encode())
    package = Path(__file__).resolve().parents[1]
    for part in (data_dir("grammar") / "hpdsl.lark", *(package / name for name in _CODE)):
        digest.update(part.read_bytes())
    return digest.hexdigest()


def _entry(source: Source) -> str | None:
    folder = cache_folder()
    if folder is None:
        return None
    try:
        code = _code_key()
    except OSError:  # the package's sources are not readable: no key to trust
        return None
    key = hashlib.sha256(f"{code}\0{source.name}\0{source.text}".encode()).hexdigest()
    return os.path.join(folder, f"parse-{code[:12]}-{key[:24]}.pickle")


def _read(path: str) -> ast.File | None:
    try:
        with open(path, "rb") as handle:
            found = pickle.load(handle)  # noqa: S301 - written by _write, in the user's own cache
    except Exception:  # missing, unreadable or damaged: parse instead
        return None
    return found if isinstance(found, ast.File) else None


def _write(path: str, file: ast.File) -> None:
    try:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            pickle.dump(file, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)  # atomic: a reader sees the old entry or the whole new one
        _prune(folder, os.path.basename(path).split("-")[1])
    except Exception:  # read-only or full: the cache is an optimisation only
        return


def _prune(folder: str, code: str) -> None:
    """Remove the entries another version of the grammar or parser wrote: they can never be read again."""
    for name in os.listdir(folder):
        if name.startswith("parse-") and name.split("-")[1] != code:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(folder, name))
