"""Document symbols: the document's declarations, with the kinds, selectors and variants inside them."""

from __future__ import annotations

from typing import Any

import attrs

from hpdsl import ast
from hpdsl.diagnostics import Span
from hpdsl.lsp.analysis import Analysis


@attrs.frozen
class Symbol:
    """One declaration: its name, what it is, its whole span, its name's span, what it holds."""

    name: str
    kind: str
    span: Span
    name_span: Span
    children: tuple[Symbol, ...] = ()


_TOP = {ast.Profile: "profile", ast.Family: "family", ast.Model: "model"}
_INNER = {ast.Kind: "kind", ast.Selector: "selector", ast.Variant: "variant"}


def symbols(analysis: Analysis) -> list[Symbol]:
    """Return the document's profiles, families and models, with their kinds, selectors and variants."""
    document = analysis.document
    out = []
    for item in document.items if document else ():
        what = _TOP.get(type(item))
        if what is not None:
            out.append(_symbol(item, what, tuple(_inner(item))))
    return out


def _inner(node: Any) -> list[Symbol]:
    return [_symbol(item, _INNER[type(item)]) for item in node.items if type(item) in _INNER]


def _symbol(node: Any, what: str, children: tuple[Symbol, ...] = ()) -> Symbol:
    return Symbol(node.name.value, what, node.span, node.name.span, children)
