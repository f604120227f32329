"""A checked family AST into its FamilyIR: every default filled, every condition lowered.

Lowering assumes the family passed hpdsl/check/families.py; on a family with
errors it still returns a value (first declaration of a repeated name wins,
an unknown parallel axis lowers to None, a missing factory to "") and never raises.

Defaults filled in for selectors that state none:

- bool: false;
- enum: its first value;
- int: the low end of its range, or 0 for an unranged `int`.

A require without a message gets "requires <canonical condition text>".

A layout lowers to one LayoutEntryIR per entry, in source order (every layout
block of the family, in order), with its split dim filled in (colwise 0,
rowwise 1, None for replicate) and its variants resolved: the `for` list, or
every variant whose params(...) declares the path. A family without a layout
block lowers to `layout=None`.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections import OrderedDict
from typing import Literal, TypeVar, cast

from hpdsl import ast
from hpdsl.ir.conditions import condition_from_ast
from hpdsl.ir.layouts import covers, dim_from_ast, sharded_dim
from hpdsl.ir.lower_fields import lower_fields
from hpdsl.ir.nodes import CostTermIR, FamilyIR, LayoutEntryIR, RequireIR, Scalar, SelectorIR, SourceRef, VariantIR
from hpdsl.model.axes import CONDITION_AXES as AXES

AxisName = Literal["tp", "cp", "ep", "pp", "etp"]
Placement = Literal["colwise", "rowwise", "replicate"]
Named = TypeVar("Named", ast.Selector, ast.Variant)


_LOWERED: OrderedDict[int, tuple[ast.Family, FamilyIR]] = OrderedDict()
_REMEMBERED = 1024


def lower_family(family: ast.Family) -> FamilyIR:
    """Return the IR of one checked family (remembered per AST object: the AST and the IR are frozen).

    Every compile lowers the standard library's families twice (the checks' clean
    set, then the registry); parses are shared (hpdsl/syntax/front.py), so an
    unchanged family is lowered once per process. Remembered by identity, not
    equality: equal ASTs from two files differ in their spans, and the IR's
    SourceRefs must name the file that was lowered.
    """
    found = _LOWERED.get(id(family))
    if found is not None and found[0] is family:
        _LOWERED.move_to_end(id(family))
        return found[1]
    lowered = _lower_family(family)
    _LOWERED[id(family)] = (family, lowered)  # holding the AST keeps its id from being reused
    if len(_LOWERED) > _REMEMBERED:
        _LOWERED.popitem(last=False)
    return lowered


def _lower_family(family: ast.Family) -> FamilyIR:
    items = family.items
    factories = [i for i in items if isinstance(i, ast.Factory)]
    axes = [i.axis.value for i in items if isinstance(i, ast.ParallelAxis)]
    parallel = cast(AxisName, axes[0]) if axes and axes[0] in AXES else None
    variants = tuple(lower_variant(v) for v in _first_by_name(
        i for i in items if isinstance(i, ast.Variant)))
    layouts = [i for i in items if isinstance(i, ast.Layout)]
    return FamilyIR(
        name=family.name.value,
        factory=str(factories[0].path.value) if factories else "",
        parallel=parallel,
        selectors=tuple(lower_selector(s) for s in _first_by_name(
            i for i in items if isinstance(i, ast.Selector))),
        requires=tuple(lower_require(r) for r in items if isinstance(r, ast.Require)),
        variants=variants,
        layout=tuple(lower_layout_entry(e, variants) for layout in layouts for e in layout.entries)
        if layouts else None,
        fields=lower_fields(items),
        source=SourceRef.from_span(family.span),
        costs=tuple(lower_cost_term(t) for block in items if isinstance(block, ast.CostBlock) for t in block.terms),
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
        params=tuple(dict.fromkeys(p.text for p in variant.params)),
        source=SourceRef.from_span(variant.span),
    )


def lower_layout_entry(entry: ast.LayoutEntry, variants: tuple[VariantIR, ...]) -> LayoutEntryIR:
    """Return a layout entry's IR: split dim filled in, the variants it applies to resolved."""
    placement = entry.placement.name.value
    explicit = None if entry.placement.dim is None else int(entry.placement.dim.value)
    path = entry.path.text
    if entry.variants:
        applies = tuple(dict.fromkeys(v.value for v in entry.variants))
    else:
        applies = tuple(v.name for v in variants if any(covers(p, path) for p in v.params))
    return LayoutEntryIR(
        path=path,
        dims=tuple(dim_from_ast(d) for d in entry.dims),
        placement=cast(Placement, placement),
        dim=sharded_dim(placement, explicit),
        unit=None if entry.unit is None else dim_from_ast(entry.unit),
        variants=applies,
        condition=None if entry.condition is None else condition_from_ast(entry.condition),
        source=SourceRef.from_span(entry.span),
    )


def lower_cost_term(term: ast.CostTerm) -> CostTermIR:
    """Return a cost term's IR: its unit, name, expression, placement, recompute mark, condition and how it is kept."""
    return CostTermIR(
        unit=term.unit.value,
        name=term.name.value,
        expr=dim_from_ast(term.expr),
        replicated=term.replicate,
        selective=term.recompute is not None and term.recompute.value == "selective",
        condition=None if term.condition is None else condition_from_ast(term.condition),
        source=SourceRef.from_span(term.span),
        sequence=term.sequence,
        bytes=term.bytes.value if term.bytes is not None else "compute",
        flash=None if term.flash is None else term.flash.value == "with",
        routed=term.routed,
    )
