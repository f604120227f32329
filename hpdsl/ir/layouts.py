"""Layout ASTs into layout IR, and layout IR into dims, split checks and per-variant tables.

The semantics of a family's `layout { ... }` live here, once. The static check
(hpdsl/check/layouts.py) and the torch backend (hpdsl/torch/layout.py) both call
`evaluate_dim`, `split_problem`, `covers` and `layout_for`, so what the checker
proves about a layout is what the build enforces.

- A dims expression is evaluated over an environment of ints: the slot config's
  names (flags as 0 or 1) and the axis sizes cp, ep, pp. Its value is exact
  (a Fraction); a name the environment lacks makes it unknown (None).
- A sharded parameter's split dim, of size S, goes into tp equal contiguous
  pieces: tp must divide S. With `by UNIT` the dim is UNIT blocks that must stay
  whole (a head's rows): S must be a multiple of UNIT and UNIT of tp.
- A variant's parameter is declared by a params(...) path equal to it or
  naming a submodule above it; an entry applies to the variants listed in its
  `for`, else to every variant that declares its path.
- An entry with `if C` is a parameter the module has exactly when C holds on
  the slot config (flags as bools, ints as ints; `entry_present`); an entry
  without one, always. The layout is exact: the torch backend refuses a module
  with a parameter the layout does not declare present, or lacking one it
  does, and the estimator sums the present entries (`layout_tally`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import attrs

from hpdsl import ast
from hpdsl.errors import ResolutionError
from hpdsl.ir.conditions import evaluate
from hpdsl.ir.nodes import DimIR, FamilyIR, LayoutEntryIR
from hpdsl.model.layouts import PLACEMENT_DIMS

# Binding strength: a sum inside a product, or any compound inside its own kind, needs parentheses.
_SUM, _PRODUCT, _ATOM = range(3)


# --------------------------------------------------------------------------
# AST -> IR
# --------------------------------------------------------------------------


def dim_from_ast(expr: ast.DimExpr) -> DimIR:
    """Return the DimIR of a dims expression AST, its canonical text filled in at the root."""
    dim = _from_ast(expr)
    return DimIR(dim.op, dim.value, dim.name, dim.operands, dim.divisors, render_dim(dim))


def _from_ast(expr: ast.DimExpr) -> DimIR:
    if isinstance(expr, ast.Literal):
        return DimIR("int", value=int(expr.value))
    if isinstance(expr, ast.Name):
        return DimIR("name", name=expr.value)
    if isinstance(expr, ast.DimSum):
        return DimIR("sum", operands=tuple(_from_ast(t) for t in expr.terms))
    return DimIR("product", operands=tuple(_from_ast(f) for f in expr.factors),
                 divisors=tuple(_from_ast(d) for d in expr.divisors))


def sharded_dim(placement: str, explicit: int | None) -> int | None:
    """Return the tensor dim a placement splits: the stated one, its default, or None (replicate)."""
    if placement not in PLACEMENT_DIMS:
        return None
    return PLACEMENT_DIMS[placement] if explicit is None else explicit


def covers(declared: str, path: str) -> bool:
    """Return whether a params(...) path declares the parameter at `path` (itself or a submodule above it)."""
    return path == declared or path.startswith(declared + ".")


# --------------------------------------------------------------------------
# IR -> text and values
# --------------------------------------------------------------------------


def render_dim(dim: DimIR) -> str:
    """Return the canonical text of a dims expression: the grammar's syntax, minimal parentheses."""
    return _render(dim)[0]


def render_dims(dims: Sequence[DimIR]) -> str:
    """Return a parameter's dims as they are written: `(heads * head_dim, hidden)`."""
    return f"({', '.join(render_dim(d) for d in dims)})"


def _render(dim: DimIR) -> tuple[str, int]:
    if dim.op == "int":
        return str(dim.value), _ATOM
    if dim.op == "name":
        return str(dim.name), _ATOM
    if dim.op == "sum":
        return " + ".join(_operand(t, _SUM) for t in dim.operands), _SUM
    text = " * ".join(_operand(f, _PRODUCT) for f in dim.operands)
    return text + "".join(f" / {_operand(d, _PRODUCT)}" for d in dim.divisors), _PRODUCT


def _operand(dim: DimIR, parent: int) -> str:
    text, strength = _render(dim)
    return f"({text})" if strength <= parent else text


def dim_names(dim: DimIR) -> set[str]:
    """Return every name a dims expression reads."""
    if dim.op == "name":
        return {str(dim.name)}
    return set().union(*(dim_names(d) for d in (*dim.operands, *dim.divisors)))


def evaluate_dim(dim: DimIR, env: Mapping[str, int]) -> Fraction | None:
    """Return the exact value of a dims expression, or None when it reads a name `env` lacks."""
    if dim.op == "int":
        return Fraction(int(dim.value or 0))
    if dim.op == "name":
        value = env.get(str(dim.name))
        return None if value is None else Fraction(value)
    operands = [evaluate_dim(d, env) for d in dim.operands]
    divisors = [evaluate_dim(d, env) for d in dim.divisors]
    factors = [v for v in operands if v is not None]
    nonzero = [d for d in divisors if d is not None and d != 0]
    if len(factors) < len(operands) or len(nonzero) < len(divisors):
        return None
    if dim.op == "sum":
        return sum(factors, Fraction(0))
    product = Fraction(1)
    for factor in factors:
        product *= factor
    for divisor in nonzero:
        product /= divisor
    return product


def whole(value: Fraction | None) -> int | None:
    """Return a dims value as an int, or None when it is unknown or not a whole number."""
    return int(value) if value is not None and value.denominator == 1 else None


def split_problem(size: int, tp: int, unit: int | None = None) -> str | None:
    """Return why a dim of `size` cannot be split over tp (in whole `unit` blocks), or None when it can."""
    if unit is None:
        return None if size % tp == 0 else f"{size} is not a multiple of tp={tp}"
    if unit < 1 or size % unit:
        return f"{size} is not a whole number of {unit} blocks"
    if unit % tp:
        return f"its {unit} blocks do not split evenly over tp={tp}"
    return None


# --------------------------------------------------------------------------
# Per-variant tables
# --------------------------------------------------------------------------


def layout_for(family: FamilyIR, variant: str) -> dict[str, LayoutEntryIR]:
    """Return the layout entries that apply to `variant`, by parameter path (empty without a layout)."""
    return {entry.path: entry for entry in family.layout or () if variant in entry.variants}


def declared_params(family: FamilyIR, variant: str) -> tuple[str, ...]:
    """Return the params(...) paths `variant` declares."""
    return next((v.params for v in family.variants if v.name == variant), ())


def entry_present(entry: LayoutEntryIR, env: Mapping[str, int]) -> bool | None:
    """Return whether a module built on `env` has the entry's parameter; None when its condition reads a name `env` lacks."""
    if entry.condition is None:
        return True
    try:
        return evaluate(entry.condition, env)
    except ResolutionError:
        return None


def default_variant(family: FamilyIR) -> str:
    """Return the family's default variant (its first when none is marked; "" without variants)."""
    return next((v.name for v in family.variants if v.default), family.variants[0].name if family.variants else "")


@attrs.frozen
class LayoutTally:
    """What a family's layout says its module holds and multiplies: parameters and per-token multiply-adds.

    `by_path` holds each present entry's element count, by parameter path.
    """

    params: int
    macs: int
    by_path: tuple[tuple[str, int], ...] = ()


def entry_numel(entry: LayoutEntryIR, env: Mapping[str, int]) -> int | None:
    """Return the elements of the entry's parameter on `env` (0 when absent); None when unknown or not whole."""
    present = entry_present(entry, env)
    if present is None:
        return None
    sizes = [whole(evaluate_dim(d, env)) for d in entry.dims]
    if any(size is None for size in sizes):
        return None if present else 0
    numel = 1
    for size in sizes:
        numel *= int(size or 0)
    return numel if present else 0


def layout_tally(family: FamilyIR, env: Mapping[str, int], variant: str | None = None) -> LayoutTally | None:
    """Return the parameters and per-token multiply-adds `variant`'s layout declares on `env` (default variant).

    Parameters: every present entry's dims multiplied out (an entry whose `if`
    fails, or whose dims evaluate to 0, is a parameter the config leaves out).
    Per-token multiply-adds: every module weight (a path ending in `.weight`) of
    rank ≥ 2, which a Linear or a depthwise convolution applies once per token,
    its numel each (docs/cost-model.md, "Layout-priced mixers"). None when the
    family has no layout or a present entry's dims are unknown or not whole.
    """
    entries = layout_for(family, default_variant(family) if variant is None else variant)
    if not entries:
        return None
    params = macs = 0
    counted: list[tuple[str, int]] = []
    for path, entry in entries.items():
        numel = entry_numel(entry, env)
        if numel is None:
            return None
        params += numel
        counted.append((path, numel))
        if path.endswith(".weight") and len(entry.dims) >= 2:
            macs += numel
    return LayoutTally(params, macs, tuple(counted))


__all__ = ["LayoutTally", "covers", "declared_params", "default_variant", "dim_from_ast", "dim_names",
           "entry_numel", "entry_present", "evaluate_dim", "layout_for", "layout_tally", "render_dim", "render_dims", "sharded_dim", "split_problem", "whole"]
