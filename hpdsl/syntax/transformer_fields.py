"""The transformer's rules for `field` declarations (grammar/hpdsl.lark, "Model fields").

Part of ToAst (hpdsl/syntax/transformer.py), split out to keep that module short;
like it, these methods only build nodes, with NodeBuilder's helpers (transformer_base.py).
"""

from __future__ import annotations

from typing import Any

from lark import Token, v_args
from lark.tree import Meta

from hpdsl import ast
from hpdsl.syntax.transformer_base import NodeBuilder


class _Block:
    """Marks `in BLOCK` among a declaration's optional parts."""

    def __init__(self, name: ast.Name) -> None:
        self.name = name


class _Required:
    """Marks `required` among a declaration's optional parts."""


class _Keys:
    """Marks `hf(KEYS)` among a declaration's optional parts."""

    def __init__(self, keys: tuple[ast.Name, ...]) -> None:
        self.keys = keys


class _DefaultName:
    """Marks `= NAME` (an enum default) among a declaration's optional parts."""

    def __init__(self, name: ast.Name) -> None:
        self.name = name


@v_args(meta=True)
class FieldDeclRules(NodeBuilder):
    """One method per rule of a `field` declaration."""

    def field_decl(self, meta: Meta, children: list[Any]) -> ast.FieldDecl:
        name, type_, *rest = children
        meaning = self._string(rest.pop())
        bounds = tuple(part for part in rest if isinstance(part, ast.FieldBound))
        block = next((part.name for part in rest if isinstance(part, _Block)), None)
        default: ast.Literal | ast.Name | None = next((part for part in rest if isinstance(part, ast.Literal)), None)
        default = next((part.name for part in rest if isinstance(part, _DefaultName)), default)
        keys = next((part.keys for part in rest if isinstance(part, _Keys)), ())
        required = any(isinstance(part, _Required) for part in rest)
        return ast.FieldDecl(self._name(name), type_, bounds, block, default, required, keys, meaning,
                             span=self._span(meta))

    def field_int(self, meta: Meta, children: list[Token]) -> ast.ScalarType:
        return ast.ScalarType("int", span=self._span(meta))

    def field_float(self, meta: Meta, children: list[Token]) -> ast.ScalarType:
        return ast.ScalarType("float", span=self._span(meta))

    def field_string(self, meta: Meta, children: list[Token]) -> ast.ScalarType:
        return ast.ScalarType("string", span=self._span(meta))

    def field_bound(self, meta: Meta, children: list[Token]) -> ast.FieldBound:
        op, value = children
        return ast.FieldBound(str(op), self._int(value), span=self._span(meta))

    def field_block(self, meta: Meta, children: list[Token]) -> _Block:
        return _Block(self._name(children[0]))

    def field_default_name(self, meta: Meta, children: list[Token]) -> _DefaultName:
        return _DefaultName(self._name(children[0]))

    def field_required(self, meta: Meta, children: list[Token]) -> _Required:
        return _Required()

    def field_hf(self, meta: Meta, children: list[Token]) -> _Keys:
        return _Keys(tuple(self._name(token) for token in children))
