"""Text into AST: the cached Lark parser and the tree-to-AST transformer."""

from hpdsl.syntax.parser import parse_source, parse_text

__all__ = ["parse_source", "parse_text"]
