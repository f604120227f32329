"""A kind's own head shapes (`dims { FIELD = DIMS ... }` in a kind) into diagnostics.

A kind may give its layers other head counts, head dims or attention flags than the
model's (MiMo-V2-Flash's sliding layers: twice the kv heads, and sinks): each entry
sets one of KIND_DIM_FIELDS to dims over the model's top-level int and flag fields
(the standard ones and those the profile declares), evaluated on the model when it
is bound (hpdsl/bound/bind.py). A field set twice in one block, a field a kind may
not set (the model-wide ones: hidden, vocab, layers, ...) and a name the dims
cannot read are each reported, located, with a hint. Whether the values are whole,
positive and divide as the modules need is judged per model (hpdsl/bound/shape.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from hpdsl import ast
from hpdsl.diagnostics import Collector, Note, did_you_mean
from hpdsl.ir.lower_fields import lower_fields
from hpdsl.model.fields import FIELDS
from hpdsl.model.slots import KIND_DIM_FIELDS


def check_kind_dims(profile: ast.Profile, collector: Collector) -> None:
    """Report every problem with the `dims { }` blocks of one profile's kinds."""
    readable = _readable(profile)
    for kind in (item for item in profile.items if isinstance(item, ast.Kind)):
        for block in (item for item in kind.items if isinstance(item, ast.KindDims)):
            _check_block(kind, block, readable, collector)


def _readable(profile: ast.Profile) -> set[str]:
    """Return the fields a kind's dims may read: top-level int and flag fields, standard or the profile's."""
    declared = [f for f in lower_fields(profile.items) if f.block is None and f.name not in FIELDS]
    fields = [*(f for f in FIELDS.values() if f.block is None), *declared]
    return {f.name for f in fields if f.type in ("int", "bool")}


def _check_block(kind: ast.Kind, block: ast.KindDims, readable: set[str], collector: Collector) -> None:
    first: dict[str, ast.KindDim] = {}
    for entry in block.entries:
        name = entry.field.value
        if name in first:
            collector.error(entry.field.span, "duplicate-statement",
                            f"kind '{kind.name.value}' sets '{name}' twice in its dims; it may set it once",
                            hint="remove one of the two entries", notes=(Note(first[name].span, "the first one"),))
        first.setdefault(name, entry)
        if name not in KIND_DIM_FIELDS:
            collector.error(entry.field.span, "kind-dim-field",
                            f"kind '{kind.name.value}' sets '{name}', which a kind may not set: a kind's dims "
                            f"give its layers their own head shapes ({', '.join(KIND_DIM_FIELDS)})",
                            hint=did_you_mean(name, KIND_DIM_FIELDS)
                            or "state the field on the model; a kind sets only its layers' head shapes")
        for read in _names(entry.value):
            if read.value not in readable:
                collector.error(read.span, "unknown-dim-field",
                                f"kind '{kind.name.value}''s dims read '{read.value}', which is not a model "
                                "field holding a number or a flag",
                                hint=did_you_mean(read.value, sorted(readable))
                                or "docs/language.md lists the model fields")


def _names(expr: ast.DimExpr) -> Iterator[ast.Name]:
    if isinstance(expr, ast.Name):
        yield expr
    elif isinstance(expr, ast.DimSum):
        for term in expr.terms:
            yield from _names(term)
    elif isinstance(expr, ast.DimProduct):
        for term in (*expr.factors, *expr.divisors):
            yield from _names(term)


__all__ = ["check_kind_dims"]
