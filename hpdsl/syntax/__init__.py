"""Text into AST: the cached Lark parser and the tree-to-AST transformer.

`parse_source` and `parse_text` here go through hpdsl/syntax/cache.py, which
answers the shipped files from disk and imports the parser (and Lark) only to
parse: `hpdsl compile` of the standard library with a warm cache loads no Lark.
"""

from hpdsl.syntax.cache import parse_source, parse_text

__all__ = ["parse_source", "parse_text"]
