"""Family layouts into diagnostics: placements, dims, parameter coverage, and divisibility over the models.

A family's `layout { ... }` is judged by the contract in hpdsl/ir/layouts.py,
in two passes:

1. On its own (every family declaration): placements are colwise, rowwise or
   replicate; a replicated parameter names no split dim or unit; the split dim
   exists among the parameter's dims; dims read only slot-config names
   (hpdsl.bound.config.DIM_NAMES) and cp, ep, pp; a `for` names declared variants that
   declare the path; every variant lists its params(...), and every parameter
   a variant declares is placed exactly once for it.
2. Against the models in scope (families and models without errors): when the
   family's requires allow only finitely many tp values, every sharded dim of
   every entry must split at each tp > 1 at which a variant having the entry is
   selected, for every model whose layers fill a slot with the family
   (the kind's slot bindings, hpdsl/bound/slots.py), evaluated on the very slot configs the
   torch backend builds from. When tp is unbounded the backend checks at build
   time instead, before sharding.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from hpdsl import ast
from hpdsl.check.coverage import DOMAIN_LIMIT, Domain, Variable, family_domain, family_items
from hpdsl.bound.bind import bind
from hpdsl.diagnostics import Collector, Diagnostic, Note, Span, did_you_mean
from hpdsl.ir.conditions import matching_variants, violated_requires
from hpdsl.ir.layouts import covers, dim_from_ast, evaluate_dim, render_dim, sharded_dim, split_problem, whole
from hpdsl.ir.lower_families import lower_family
from hpdsl.ir.lower_models import DEFAULT_PROFILE, lower_model
from hpdsl.ir.lower_profiles import lower_profile
from hpdsl.ir.nodes import FamilyIR, LayoutEntryIR
from hpdsl.bound.config import DIM_NAMES, dim_environment
from hpdsl.bound.slots import Slot, model_slots
from hpdsl.model.layouts import LAYOUT_AXES, PLACEMENTS
from hpdsl.scope import Scope

TP_LIMIT = 1024
"""Above this many tp values to try, tp counts as unbounded (the build checks instead)."""

_WORK_LIMIT = 2_000_000


def check_layouts(scope: Scope, collector: Collector) -> None:
    """Report every problem with the layouts of the families in scope, divisibility included."""
    for file in scope.files:
        for item in file.items:
            if isinstance(item, ast.Family):
                check_layout(item, collector)
    _check_divisibility(scope, collector)


# --------------------------------------------------------------------------
# A layout on its own
# --------------------------------------------------------------------------


def check_layout(family: ast.Family, collector: Collector) -> None:
    """Report every problem with one family's params(...) lists and layout blocks."""
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
        _check_entry(entry, collector)
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


def _check_entry(entry: ast.LayoutEntry, collector: Collector) -> None:
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
        for ref in _names(expr):
            _check_dim_name(ref, collector)


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


def _names(expr: ast.DimExpr) -> Iterator[ast.Name]:
    if isinstance(expr, ast.Name):
        yield expr
    elif isinstance(expr, ast.DimSum):
        for term in expr.terms:
            yield from _names(term)
    elif isinstance(expr, ast.DimProduct):
        for part in (*expr.factors, *expr.divisors):
            yield from _names(part)


def _check_dim_name(ref: ast.Name, collector: Collector) -> None:
    if ref.value in DIM_NAMES or ref.value in LAYOUT_AXES:
        return
    if ref.value == "tp":
        hint = "dims are the parameter's shape before tensor parallelism; the backend divides the split dim by tp"
    else:
        hint = did_you_mean(ref.value, (*DIM_NAMES, *LAYOUT_AXES))
    collector.error(ref.span, "unknown-dim-field",
                    f"'{ref.value}' is neither a field of the slot config a module is built from nor "
                    "cp, ep or pp", hint=hint)


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


# --------------------------------------------------------------------------
# Divisibility over the models in scope
# --------------------------------------------------------------------------


def variant_tp_values(family: FamilyIR) -> dict[str, tuple[int, ...]] | None:
    """Return, per variant, the tp values > 1 it is selected at; None when tp is unbounded (or too wide)."""
    domain = family_domain(family)
    names = [v.name for v in domain.variables]
    if "tp" not in names:
        return None
    top = max(int(v) for v in domain.variables[names.index("tp")].values)
    if _selected(family, domain, top) or top > TP_LIMIT:
        return None  # the largest representative stands for every tp above the constants
    if (top - 2) * max(domain.size // len(domain.variables[names.index("tp")].values), 1) > _WORK_LIMIT:
        return None
    found: dict[str, set[int]] = {}
    for tp in range(2, top):
        for variant in _selected(family, domain, tp):
            found.setdefault(variant, set()).add(tp)
    return {name: tuple(sorted(values)) for name, values in found.items()}


def _selected(family: FamilyIR, domain: Domain, tp: int) -> set[str]:
    """Return the variants some allowed assignment with this tp selects."""
    fixed = Domain(tuple(Variable(v.name, (tp,)) if v.name == "tp" else v for v in domain.variables),
                   domain.axis)
    chosen: set[str] = set()
    for env in fixed.assignments():
        if not violated_requires(family.requires, env):
            chosen.update(v.name for v in matching_variants(family.variants, env))
    return chosen


@attrs.frozen
class _Use:
    """One slot of one model that a family fills."""

    model: ast.Model
    kind: str | None
    slot: Slot


def _check_divisibility(scope: Scope, collector: Collector) -> None:
    errors = [d for d in collector.diagnostics if d.is_error]
    bounded = []
    for family in scope.families.values():
        if family_items(family, ast.Layout) and not _has_errors(family.span, errors):
            ir = lower_family(family)
            if family_domain(ir).size <= DOMAIN_LIMIT and (tps := variant_tp_values(ir)):
                bounded.append((family, ir, tps))
    if not bounded:
        return
    uses = list(_uses(scope, errors))
    for family, ir, tps in bounded:
        mine = [u for u in uses if u.slot.family == family.name.value]
        entries = [e for layout in family_items(family, ast.Layout) for e in layout.entries]
        for entry, lowered in zip(entries, ir.layout or (), strict=True):
            allowed = sorted({tp for v in lowered.variants for tp in tps.get(v, ())})
            _check_entry_splits(entry, lowered, allowed, mine, collector)


def _has_errors(span: Span, errors: list[Diagnostic]) -> bool:
    start, end = (span.line, span.col), (span.end_line, span.end_col)
    return any(d.span.file == span.file and start <= (d.span.line, d.span.col) <= end for d in errors)


def _uses(scope: Scope, errors: list[Diagnostic]) -> Iterator[_Use]:
    """Yield every slot of every model without errors whose profile has none either."""
    for model in scope.models.values():
        profile = scope.profiles.get(model.profile.value if model.profile else DEFAULT_PROFILE)
        if profile is None or _has_errors(model.span, errors) or _has_errors(profile.span, errors):
            continue
        try:
            cost = bind(lower_model(model, scope), lower_profile(profile, scope))
        except (KeyError, ValueError, ArithmeticError):  # a check never raises: such a model is skipped
            continue
        for kind, slot in model_slots(cost):
            yield _Use(model, kind, slot)


def _check_entry_splits(entry: ast.LayoutEntry, lowered: LayoutEntryIR, allowed: list[int],
                        uses: list[_Use], collector: Collector) -> None:
    if lowered.dim is None or lowered.dim >= len(lowered.dims) or not allowed:
        return
    failures = [(tp, use, problem) for tp in allowed for use in uses
                if (problem := _split(lowered, use, tp)) is not None]
    if not failures:
        return
    tp, use, (size, unit, reason) = failures[0]
    failing = {f[0] for f in failures}
    fine = [1, *(t for t in allowed if t not in failing)]
    dim = lowered.dims[lowered.dim]
    by = "" if unit is None or lowered.unit is None else f", by {lowered.unit.text} = {unit}"
    unit_fails = unit is not None and size % unit == 0
    span = entry.unit.span if unit_fails and entry.unit is not None else entry.dims[lowered.dim].span
    collector.error(span, "shard-not-divisible",
                    f"at tp={tp}, model '{use.model.name.value}' cannot split dim {lowered.dim} of "
                    f"'{lowered.path}' ({dim.text} = {size}{by}): {reason}",
                    hint=_split_hint([1, *allowed], fine),
                    notes=(Note(use.model.name.span, f"model '{use.model.name.value}' fills slot "
                                                     f"'{use.slot.path}' with this family"
                                                     + (f" in its '{use.kind}' layers" if use.kind else "")),))


def _split_hint(allowed: list[int], fine: list[int]) -> str:
    said = f"the family's requires allow tp in ({', '.join(map(str, allowed))})"
    if fine == [1]:
        return (f"{said}, and no tp above 1 splits it for every model: split it by a unit the models' "
                "dims divide, replicate it, or narrow the requires to `require tp == 1`")
    values = ", ".join(map(str, fine))
    return f"{said}; tp in ({values}) splits it for every model: narrow them, e.g. `require tp in ({values})`"


def _split(entry: LayoutEntryIR, use: _Use, tp: int) -> tuple[int, int | None, str] | None:
    """Return (size, unit, problem) when the entry's split dim does not split at tp for this slot."""
    if entry.dim is None:
        return None  # replicated: nothing splits
    env = dim_environment(use.slot.config)
    size = whole(evaluate_dim(entry.dims[entry.dim], env))
    unit = None if entry.unit is None else whole(evaluate_dim(entry.unit, env))
    if size is None or (entry.unit is not None and unit is None):
        return None  # reads an axis size or is not whole: the build checks it
    problem = split_problem(size, tp, unit)
    return None if problem is None else (size, unit, problem)


__all__ = ["TP_LIMIT", "check_layout", "check_layouts", "variant_tp_values"]
