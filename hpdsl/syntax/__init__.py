"""Text into AST: the fast parser, the Lark parser and the tree-to-AST transformer.

`parse_source` and `parse_text` here go through hpdsl/syntax/front.py, which
tries the fast parser first and imports Lark only where it defers: a compile of
valid files loads no Lark.
"""

from hpdsl.syntax.front import parse_source, parse_text

__all__ = ["parse_source", "parse_text"]
