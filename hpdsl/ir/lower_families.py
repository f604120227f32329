"""A checked family AST into its FamilyIR: every default filled, every condition lowered.

Lowering assumes the family passed hpdsl/check/families.py; on a family with
errors it still returns a value (first declaration of a repeated name wins,
an unknown parallel axis lowers to None, a missing factory to "") and never raises.

Defaults filled in for selectors that state none:

- bool: false;
- enum: its first value;
- int: the low end of its range, or 0 for an unranged `int`.

A require without a message gets "requires <canonical condition text>".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, TypeVar, cast

from hpdsl import ast
from hpdsl.ir.conditions import condition_from_ast
from hpdsl.ir.nodes import FamilyIR, RequireIR, Scalar, SelectorIR, SourceRef, VariantIR
from hpdsl.spec import AXES

AxisName = Literal["tp", "cp", "ep", "pp"]
Named = TypeVar("Named", ast.Selector, ast.Variant)


def lower_family(family: ast.Family) -> FamilyIR:
    """Return the IR of one checked family."""
    items = family.items
    factories = [i for i in items if isinstance(i, ast.Factory)]
    axes = [i.axis.value for i in items if isinstance(i, ast.ParallelAxis)]
    parallel = cast(AxisName, axes[0]) if axes and axes[0] in AXES else None
    return FamilyIR(
        name=family.name.value,
        factory=str(factories[0].path.value) if factories else "",
        parallel=parallel,
        selectors=tuple(lower_selector(s) for s in _first_by_name(
            i for i in items if isinstance(i, ast.Selector))),
        requires=tuple(lower_require(r) for r in items if isinstance(r, ast.Require)),
        variants=tuple(lower_variant(v) for v in _first_by_name(
            i for i in items if isinstance(i, ast.Variant))),
        source=SourceRef.from_span(family.span),
    )


def _first_by_name(items: Iterable[Named]) -> list[Named]:
    named: dict[str, Named] = {}
    for item in items:
        named.setdefault(item.name.value, item)
    return list(named.values())


def lower_selector(selector: ast.Selector) -> SelectorIR:
    """Return a selector's IR with its default filled in (see the module docs)."""
    source = SourceRef.from_span(selector.span)
    type_ = selector.type
    stated = None if selector.default is None else selector.default.value
    if isinstance(type_, ast.BoolType):
        return SelectorIR(selector.name.value, "bool", _or(stated, False), source=source)
    if isinstance(type_, ast.EnumType):
        values = tuple(dict.fromkeys(v.value for v in type_.values))
        return SelectorIR(selector.name.value, "enum", _or(stated, values[0]), values=values,
                          source=source)
    low = None if type_.low is None else int(type_.low.value)
    high = None if type_.high is None else int(type_.high.value)
    return SelectorIR(selector.name.value, "int", _or(stated, 0 if low is None else low),
                      low=low, high=high, source=source)


def _or(stated: Scalar | None, fallback: Scalar) -> Scalar:
    return fallback if stated is None else stated


def lower_require(require: ast.Require) -> RequireIR:
    """Return a require's IR; without a stated message, one is generated from the condition."""
    condition = condition_from_ast(require.condition)
    message = (str(require.message.value) if require.message is not None
               else f"requires {condition.text}")
    return RequireIR(condition, message, source=SourceRef.from_span(require.span))


def lower_variant(variant: ast.Variant) -> VariantIR:
    """Return a variant's IR: path, default mark, condition and accepted arguments."""
    return VariantIR(
        name=variant.name.value,
        path=str(variant.path.value),
        default=variant.is_default,
        when=None if variant.when is None else condition_from_ast(variant.when),
        accepts=tuple(dict.fromkeys(a.value for a in variant.accepts)),
        source=SourceRef.from_span(variant.span),
    )
