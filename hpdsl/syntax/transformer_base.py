"""What every part of the Lark-tree-to-AST transformer shares: the file it reads and node helpers.

ToAst (hpdsl/syntax/transformer.py) and its split-out rule sets (transformer_fields.py)
derive from it, so each reaches the same span and literal builders.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, v_args
from lark.tree import Meta

from hpdsl import ast
from hpdsl.diagnostics.span import Span
from hpdsl.syntax.text import unquote


@v_args(meta=True)
class NodeBuilder(Transformer):
    """The spans and literals every grammar rule's method builds its node from."""

    def __init__(self, file: str) -> None:
        super().__init__()
        self.file = file

    def _span(self, meta: Meta) -> Span:
        if getattr(meta, "empty", True):
            return Span.point(self.file)
        return Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column)

    def _token_span(self, token: Token) -> Span:
        if token.line is None or token.column is None or token.end_line is None or token.end_column is None:
            return Span.point(self.file)  # lark types positions Optional; tokens it lexes have them
        return Span(self.file, token.line, token.column, token.end_line, token.end_column)

    def _name(self, token: Token) -> ast.Name:
        return ast.Name(str(token), span=self._token_span(token))

    def _literal(self, token: Token, kind: ast.LiteralKind, value: Any) -> ast.Literal:
        return ast.Literal(value, kind, span=self._token_span(token))

    def _string(self, token: Token) -> ast.Literal:
        return self._literal(token, "string", unquote(str(token)))

    def _int(self, token: Token) -> ast.Literal:
        return self._literal(token, "int", int(token))


__all__ = ["NodeBuilder"]
