"""Families: factory, parallel axis, selectors, requirements, variants and the family node."""

from __future__ import annotations

from typing import Union

import attrs

from hpdsl.ast.conditions import Expr
from hpdsl.ast.fields import FieldDecl, SelectorType
from hpdsl.ast.layouts import CostBlock, Layout, ParamPath
from hpdsl.ast.leaves import Literal, Name, _span
from hpdsl.diagnostics.span import Span


# --------------------------------------------------------------------------
# Families
# --------------------------------------------------------------------------


@attrs.frozen
class Factory:
    """`factory "package.module:Name"`: the family's public factory."""

    path: Literal
    span: Span = _span()


@attrs.frozen
class ParallelAxis:
    """`parallel ep`: the axis whose size > 1 makes the family parallel."""

    axis: Name
    span: Span = _span()


@attrs.frozen
class Selector:
    """`selector NAME: TYPE [= DEFAULT]`."""

    name: Name
    type: SelectorType
    default: Literal | Name | None
    span: Span = _span()


@attrs.frozen
class Require:
    """`require EXPR ["message"]`: a constraint every request must meet."""

    condition: Expr
    message: Literal | None
    span: Span = _span()


@attrs.frozen
class Variant:
    """`variant NAME "path" [default] [when EXPR] [accepts(a, b)] [params(p.q, r)]`."""

    name: Name
    path: Literal
    is_default: bool
    when: Expr | None
    accepts: tuple[Name, ...]
    params: tuple[ParamPath, ...] = ()
    span: Span = _span()


FamilyItem = Union[Factory, ParallelAxis, Selector, Require, Variant, Layout, CostBlock, "FieldDecl"]


@attrs.frozen
class Family:
    """`family NAME { ... }`: a public factory and the rules choosing its variant."""

    name: Name
    items: tuple[FamilyItem, ...]
    span: Span = _span()
