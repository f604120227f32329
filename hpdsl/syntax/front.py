"""Text into AST: the fast path first, Lark (hpdsl/syntax/parser.py) only where it defers.

Valid text, which is nearly every file a run reads, parses in the hand-written
fast parser (hpdsl/syntax/fast.py), which imports no Lark; Lark is imported, and
its shipped tables loaded, only for text the fast path is not sure of, to accept
it or to write the syntax diagnostic. Parses are remembered in memory by name
and text (the AST is frozen, so sharing it is safe): a language server
re-checking after one edit re-parses only the file that changed. No parse is
kept on disk: the fast path parses the whole standard library faster than a
disk cache read it back (docs/caches.md).
"""

from __future__ import annotations

from functools import lru_cache

from hpdsl import ast
from hpdsl.diagnostics import Source
from hpdsl.syntax.fast import fast_parse
from hpdsl.syntax.limits import MAX_FILE_CHARS, MAX_LINE_CHARS



def parse_source(source: Source) -> ast.File:
    """Parse a Source into an ast.File with its comments; raise SpecError on bad syntax."""
    return _parse_remembered(source.name, source.text)


def parse_text(text: str, name: str = "<string>") -> ast.File:
    """Parse one .hpf text; raise SpecError carrying the syntax diagnostic."""
    return parse_source(Source(name, text))


@lru_cache(maxsize=256)
def _parse_remembered(name: str, text: str) -> ast.File:
    fast = fast_parse(name, text, MAX_FILE_CHARS, MAX_LINE_CHARS)
    if fast is not None:
        return fast
    from hpdsl.syntax.parser import lark_parse

    return lark_parse(Source(name, text))


__all__ = ["parse_source", "parse_text"]
