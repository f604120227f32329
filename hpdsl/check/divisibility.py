"""Family layouts against the models in scope: every sharded dim must split at each tp a family allows.

An IR pass (hpdsl/check/__init__.py): it judges the clean families and the
clean, buildable models (hpdsl/check/clean.py, after hpdsl/check/shapes.py).
When a family's requires allow only finitely many tp values, every sharded dim
of every layout entry must split at each tp > 1 at which a variant having the
entry is selected, for every model whose layers fill a slot with the family
(the family its kind's `slots { }` binding names), evaluated on the very slot configs the torch backend builds
from (hpdsl/bound/slots.py). When tp is unbounded the backend checks at build
time instead, before sharding.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from hpdsl.bound.bind import CostModel
from hpdsl.bound.config import dim_environment
from hpdsl.bound.slots import Slot, model_slots
from hpdsl.check.clean import Clean, located
from hpdsl.check.coverage import DOMAIN_LIMIT, Domain, Variable, family_domain
from hpdsl.diagnostics import NO_SPAN, Collector, Note
from hpdsl.ir.conditions import matching_variants, violated_requires
from hpdsl.ir.layouts import evaluate_dim, split_problem, whole
from hpdsl.ir.nodes import FamilyIR, LayoutEntryIR

TP_LIMIT = 1024
"""Above this many tp values to try, tp counts as unbounded (the build checks instead)."""

_WORK_LIMIT = 2_000_000


def check_divisibility(clean: Clean, collector: Collector) -> Clean:
    """Report every sharded dim of a bounded-tp family that a clean model's slot does not split."""
    bounded = [(family, tps) for family in clean.families.values()
               if family.layout and family_domain(family).size <= DOMAIN_LIMIT
               and (tps := variant_tp_values(family))]
    if not bounded:
        return clean
    uses = [use for cost in clean.models.values() for use in _uses(cost)]
    for family, tps in bounded:
        mine = [u for u in uses if u.slot.family == family.name]
        for entry in family.layout or ():
            allowed = sorted({tp for v in entry.variants for tp in tps.get(v, ())})
            _check_entry_splits(entry, allowed, mine, collector)
    return clean


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

    cost: CostModel
    kind: str | None
    slot: Slot


def _uses(cost: CostModel) -> Iterator[_Use]:
    """Yield every slot of every kind of a bound model."""
    for kind, slot in model_slots(cost):
        yield _Use(cost, kind, slot)


def _check_entry_splits(entry: LayoutEntryIR, allowed: list[int], uses: list[_Use],
                        collector: Collector) -> None:
    if entry.dim is None or entry.dim >= len(entry.dims) or not allowed:
        return
    failures = [(tp, use, problem) for tp in allowed for use in uses
                if (problem := _split(entry, use, tp)) is not None]
    if not failures:
        return
    tp, use, (size, unit, reason) = failures[0]
    failing = {f[0] for f in failures}
    fine = [1, *(t for t in allowed if t not in failing)]
    dim = entry.dims[entry.dim]
    by = "" if unit is None or entry.unit is None else f", by {entry.unit.text} = {unit}"
    model = use.cost.model
    collector.error(located(entry.source, entry.path) or NO_SPAN, "shard-not-divisible",
                    f"at tp={tp}, model '{model.name}' cannot split dim {entry.dim} of "
                    f"'{entry.path}' ({dim.text} = {size}{by}): {reason}",
                    hint=_split_hint([1, *allowed], fine),
                    notes=(Note(located(model.source, model.name) or NO_SPAN,
                                f"model '{model.name}' fills slot '{use.slot.path}' with this family"
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
    env = dim_environment(use.slot.config)
    size = whole(evaluate_dim(entry.dims[entry.dim or 0], env))
    unit = None if entry.unit is None else whole(evaluate_dim(entry.unit, env))
    if size is None or (entry.unit is not None and unit is None):
        return None  # reads an axis size or is not whole: the build checks it
    problem = split_problem(size, tp, unit)
    return None if problem is None else (size, unit, problem)


__all__ = ["TP_LIMIT", "check_divisibility", "variant_tp_values"]
