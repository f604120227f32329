"""Parameter paths, dims expressions, tensor-parallel layouts and cost blocks of a family."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Union

import attrs

from hpdsl.ast.conditions import Expr
from hpdsl.ast.leaves import Literal, Name, _span
from hpdsl.diagnostics.span import Span


# --------------------------------------------------------------------------
# Parameter paths
# --------------------------------------------------------------------------


@attrs.frozen
class ParamPath:
    """`q_proj.weight` or `q_proj`: a parameter, or a submodule holding parameters, of a family's module."""

    parts: tuple[Name, ...]
    span: Span = _span()

    @property
    def text(self) -> str:
        """Return the dotted path."""
        return ".".join(part.value for part in self.parts)


# --------------------------------------------------------------------------
# Tensor-parallel layouts
# --------------------------------------------------------------------------


@attrs.frozen
class DimSum:
    """`a + b + ...` in a dims expression."""

    terms: tuple[DimExpr, ...]
    span: Span = _span()


@attrs.frozen
class DimProduct:
    """`a * b / c`: the product of `factors` divided by each of `divisors`."""

    factors: tuple[DimExpr, ...]
    divisors: tuple[DimExpr, ...] = ()
    span: Span = _span()


DimExpr = Union[Literal, Name, DimSum, DimProduct]
"""A dims expression: an int literal, a config name, a sum or a product."""


def dim_names(expr: DimExpr) -> Iterator[Name]:
    """Yield every config name a dims expression reads, in source order (the checks locate each)."""
    if isinstance(expr, Name):
        yield expr
    elif isinstance(expr, DimSum):
        for term in expr.terms:
            yield from dim_names(term)
    elif isinstance(expr, DimProduct):
        for part in (*expr.factors, *expr.divisors):
            yield from dim_names(part)


@attrs.frozen
class Placement:
    """`colwise`, `rowwise`, `replicate`, or `colwise(2)` naming the split tensor dim."""

    name: Name
    dim: Literal | None = None
    span: Span = _span()


@attrs.frozen
class LayoutEntry:
    """`PATH (DIMS) PLACEMENT [by UNIT] [for a, b] [if COND]`: where one parameter lives on the tp axis."""

    path: ParamPath
    dims: tuple[DimExpr, ...]
    placement: Placement
    unit: DimExpr | None = None
    variants: tuple[Name, ...] = ()
    condition: Expr | None = None
    span: Span = _span()


@attrs.frozen
class Layout:
    """`layout { ... }`: the tensor-parallel placement of every parameter of a family's variants."""

    entries: tuple[LayoutEntry, ...]
    span: Span = _span()


@attrs.frozen
class CostTerm:
    """`UNIT NAME = EXPR [replicate|sequence|routed] [at BYTES] [recompute MODE] [with|without flash] [if COND]`: one cost term.

    `sequence`, `routed`, `at` and the flash clause say how a `saved` term is kept (docs/language.md, "Saved
    activations"): `bytes` names its byte class, `flash` is the word before `flash` (with, without).
    """

    unit: Name
    name: Name
    expr: DimExpr
    replicate: bool = False
    recompute: Name | None = None
    condition: Expr | None = None
    span: Span = _span()
    sequence: bool = False
    bytes: Name | None = None
    flash: Name | None = None
    routed: bool = False


@attrs.frozen
class CostBlock:
    """`cost { ... }`: what a family's module computes beside its weight matmuls, term by term."""

    terms: tuple[CostTerm, ...]
    span: Span = _span()
