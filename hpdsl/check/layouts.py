"""Family layouts into diagnostics: placements, dims and parameter coverage.

A family's `layout { ... }` is judged by the contract in hpdsl/ir/layouts.py,
in two passes:

1. On its own (every family declaration, here): placements are colwise, rowwise or
   replicate; a replicated parameter names no split dim or unit; the split dim
   exists among the parameter's dims; dims read only slot-config names
   (hpdsl.bound.config.DIM_NAMES) and cp, ep, pp; an `if` reads only slot-config
   names, a flag standing alone and an int compared; a `for` names declared
   variants that declare the path; every variant lists its params(...), and
   every parameter a variant declares is placed exactly once for it.
2. Against the models in scope: an IR pass over the families and models that
   checked clean (hpdsl/check/divisibility.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from hpdsl import ast
from hpdsl.bound.config import DIM_NAMES, FLAG_NAMES
from hpdsl.check.coverage import family_items
from hpdsl.diagnostics import Collector, Note, Span, did_you_mean
from hpdsl.ir.layouts import covers, dim_from_ast, render_dim, sharded_dim
from hpdsl.ir.lower_fields import declared_dim_names
from hpdsl.model.layouts import LAYOUT_AXES, PLACEMENTS
from hpdsl.scope import Scope


def check_layouts(scope: Scope, collector: Collector) -> None:
    """Report every problem with the layouts of the families in scope, each on its own."""
    declared = declared_dim_names(scope)
    for file in scope.files:
        for item in file.items:
            if isinstance(item, ast.Family):
                check_layout(item, collector, declared=declared)


# --------------------------------------------------------------------------
# A layout on its own
# --------------------------------------------------------------------------


def check_layout(family: ast.Family, collector: Collector, *, declared: frozenset[str] = frozenset()) -> None:
    """Report every problem with one family's params(...) lists and layout blocks.

    `declared` are the author fields (a profile's or family's) its dims may read beside DIM_NAMES.
    """
    variants: dict[str, ast.Variant] = {}
    for variant in family_items(family, ast.Variant):
        variants.setdefault(variant.name.value, variant)
        _report_duplicate_params(variant, collector)
    layouts: list[ast.Layout] = family_items(family, ast.Layout)
    if not layouts:
        return
    _report_extra_layouts(layouts, collector)
    for variant in variants.values():
        if not variant.params:
            collector.error(variant.name.span, "missing-parameters",
                            f"variant '{variant.name.value}' declares no params(...), but the family has "
                            "a layout that must place each of its parameters",
                            hint="list its parameters or the submodules holding them, e.g. "
                                 "`params(up_proj, down_proj)`")
    all_declared = all(v.params for v in variants.values())
    applies = []
    for entry in (e for layout in layouts for e in layout.entries):
        _check_entry(entry, collector, declared)
        applies.append((entry, _entry_variants(entry, variants, all_declared, collector)))
    _check_placed(variants, applies, collector)


def _report_extra_layouts(layouts: list[ast.Layout], collector: Collector) -> None:
    for extra in layouts[1:]:
        keyword = Span(extra.span.file, extra.span.line, extra.span.col, extra.span.line, extra.span.col + 6)
        collector.error(keyword, "duplicate-statement",
                        "a family states 'layout' once, but this is a second layout block",
                        hint="merge the entries into the first block",
                        notes=(Note(layouts[0].span, "the first layout block"),))


def _report_duplicate_params(variant: ast.Variant, collector: Collector) -> None:
    seen: dict[str, ast.ParamPath] = {}
    for path in variant.params:
        if path.text in seen:
            collector.error(path.span, "duplicate-parameter",
                            f"params(...) of variant '{variant.name.value}' lists '{path.text}' twice",
                            hint="remove the second one", notes=(Note(seen[path.text].span, "first listed here"),))
        seen.setdefault(path.text, path)


def _check_entry(entry: ast.LayoutEntry, collector: Collector, declared: frozenset[str]) -> None:
    placement = entry.placement
    name = placement.name.value
    if name not in PLACEMENTS:
        collector.error(placement.name.span, "unknown-placement",
                        f"'{name}' is not a placement; expected colwise, rowwise or replicate",
                        hint=did_you_mean(name, PLACEMENTS))
    elif name == "replicate":
        for extra, what in ((placement.dim, "split dim"), (entry.unit, "`by` unit")):
            if extra is not None:
                collector.error(extra.span, "placement-argument",
                                f"'{entry.path.text}' is replicated, so it takes no {what}",
                                hint="remove it, or shard the parameter (colwise, rowwise)")
    else:
        _check_split_dim(entry, collector)
    for expr in (*entry.dims, *(() if entry.unit is None else (entry.unit,))):
        for ref in ast.dim_names(expr):
            _check_dim_name(ref, collector, declared)
    if entry.condition is not None:
        for ref, alone in _condition_names(entry.condition):
            _check_condition_name(ref, alone, collector, declared)


def _condition_names(expr: ast.Expr) -> Iterator[tuple[ast.Name, bool]]:
    """Yield every name an entry's `if` reads, and whether it stands alone (a truth value) or is compared."""
    if isinstance(expr, ast.Reference):
        yield expr.name, True
    elif isinstance(expr, (ast.Comparison, ast.Membership)):
        yield expr.left, False  # the right side is a value
    elif isinstance(expr, ast.Negation):
        yield from _condition_names(expr.operand)
    elif isinstance(expr, (ast.AllOf, ast.AnyOf)):
        for operand in expr.operands:
            yield from _condition_names(operand)
    elif isinstance(expr, ast.Implies):
        yield from _condition_names(expr.premise)
        yield from _condition_names(expr.conclusion)


def _check_condition_name(ref: ast.Name, alone: bool, collector: Collector, declared: frozenset[str]) -> None:
    name = ref.value
    if name in declared:
        return  # an author field: its declaration's type is judged where the model states it
    if name not in DIM_NAMES:
        collector.error(ref.span, "unknown-dim-field",
                        f"the entry's `if` reads '{name}', which is not a field of the slot config a module is "
                        "built from", hint=did_you_mean(name, DIM_NAMES) or
                        "an entry's condition reads the config (flags, ints), not selectors or axes")
    elif alone and name not in FLAG_NAMES:
        collector.error(ref.span, "layout-condition-type",
                        f"'{name}' is a number, but it stands alone in the entry's `if`, where a flag is expected",
                        hint=f"compare it: `if {name} > 0`")
    elif not alone and name in FLAG_NAMES:
        collector.error(ref.span, "layout-condition-type",
                        f"'{name}' is a flag, but the entry's `if` compares it like a number",
                        hint=f"let it stand alone: `if {name}` or `if not {name}`")


def _check_split_dim(entry: ast.LayoutEntry, collector: Collector) -> None:
    placement = entry.placement
    explicit = None if placement.dim is None else int(placement.dim.value)
    dim = sharded_dim(placement.name.value, explicit)
    rank = len(entry.dims)
    if dim is None or 0 <= dim < rank:
        return
    span = placement.dim.span if placement.dim is not None else placement.name.span
    hint = (f"name a dim from 0 to {rank - 1}, e.g. `{placement.name.value}({rank - 1})`" if rank > 1 else
            "a 1-dim parameter splits along dim 0 (`colwise`), or is replicated (a rowwise Linear's bias)")
    collector.error(span, "shard-dim-out-of-range",
                    f"'{placement.name.value}' splits dim {dim}, but '{entry.path.text}' has "
                    f"{rank} dim{'s' * (rank != 1)} ({', '.join(render_dim(dim_from_ast(d)) for d in entry.dims)})",
                    hint=hint)


def _check_dim_name(ref: ast.Name, collector: Collector, declared: frozenset[str]) -> None:
    if ref.value in DIM_NAMES or ref.value in LAYOUT_AXES or ref.value in declared:
        return
    if ref.value == "tp":
        hint = "dims are the parameter's shape before tensor parallelism; the backend divides the split dim by tp"
    else:
        hint = did_you_mean(ref.value, (*DIM_NAMES, *LAYOUT_AXES, *declared))
        if not hint.startswith("did you mean"):
            hint = (f"declare it in the profile or family whose models state it: "
                    f"`field {ref.value}: int >= 1 \"what it is\"`")
    collector.error(ref.span, "unknown-dim-field",
                    f"'{ref.value}' is neither a field of the slot config a module is built from, nor a "
                    "field a profile or family declares, nor cp, ep or pp", hint=hint)


def _entry_variants(entry: ast.LayoutEntry, variants: dict[str, ast.Variant], all_declared: bool,
                    collector: Collector) -> list[str]:
    """Return the variants an entry applies to, reporting unknown and undeclaring ones."""
    path = entry.path.text
    if not entry.variants:
        found = [name for name, v in variants.items() if any(covers(p.text, path) for p in v.params)]
        if not found and all_declared:  # a variant without params(...) is reported once, above
            collector.error(entry.path.span, "undeclared-parameter",
                            f"no variant declares '{path}' in its params(...)",
                            hint="add it, or the submodule holding it, to the params(...) of the variants "
                                 "that have it; or remove the entry")
        return found
    found = []
    for ref in entry.variants:
        variant = variants.get(ref.value)
        if variant is None:
            collector.error(ref.span, "unknown-variant", f"the family declares no variant '{ref.value}'",
                            hint=did_you_mean(ref.value, variants))
        elif variant.params and not any(covers(p.text, path) for p in variant.params):
            collector.error(ref.span, "undeclared-parameter",
                            f"variant '{ref.value}' does not declare '{path}' in its params(...)",
                            hint=f"add '{path}' (or the submodule holding it) to its params(...), or drop "
                                 f"'{ref.value}' from the `for` list")
        elif ref.value not in found:
            found.append(ref.value)
    return found


def _check_placed(variants: dict[str, ast.Variant], applies: list[tuple[ast.LayoutEntry, list[str]]],
                  collector: Collector) -> None:
    duplicates: set[int] = set()
    for name, variant in variants.items():
        placed: dict[str, ast.LayoutEntry] = {}
        for entry, names in applies:
            if name not in names:
                continue
            first = placed.setdefault(entry.path.text, entry)
            if first is not entry and id(entry) not in duplicates:
                duplicates.add(id(entry))
                collector.error(entry.path.span, "duplicate-layout-entry",
                                f"'{entry.path.text}' of variant '{name}' is placed twice",
                                hint="keep one entry, or scope each to its variants with `for`",
                                notes=(Note(first.path.span, "first placed here"),))
        for declared in dict.fromkeys(p.text for p in variant.params):
            if not any(covers(declared, path) for path in placed):
                span = next(p.span for p in variant.params if p.text == declared)
                collector.error(span, "unplaced-parameter",
                                f"variant '{name}' declares '{declared}', but the layout places no "
                                "parameter of it",
                                hint=f"add an entry such as `{declared}{'.weight' * ('.' not in declared)} "
                                     "(DIMS) colwise|rowwise|replicate` to the layout")


__all__ = ["check_layout", "check_layouts"]
