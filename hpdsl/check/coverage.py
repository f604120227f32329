"""A family's IR into its coverage verdict (unsatisfiable requires, overlaps, gaps, dead
variants), and that verdict into diagnostics at the family's AST.

The analysis enumerates a finite domain that is exact for the family's
conditions, and judges every assignment with the same `evaluate` and
`matching_variants` the runtime resolves requests with.

The domain holds only the variables some require or `when` reads:

- a bool selector: false, true;  an enum selector: its values;
- an int selector: its default, the ends of its range, and every constant c it
  is compared with together with c-1 and c+1, kept inside the range;
- an axis (tp/cp/ep/pp): 1, and every constant c it is compared with together
  with c-1 and c+1, kept >= 1; the family's own axis also takes 2 when a
  condition reads `parallel`.

Every comparison against constants is constant between consecutive constants,
so one value per interval (and each constant itself) decides every condition
the way all the integers it stands for would. `parallel` is not free: it is
derived from the family axis (size > 1) by hpdsl.model.axes.with_parallel, the
rule resolution and the estimator read too.

Up to ENUMERATION_LIMIT assignments hpdsl/check/masks.py judges every
condition over the whole domain at once (bit sets) and reaches the verdict
enumeration does (enumerate_coverage stays the reference it is tested
against). Past ENUMERATION_LIMIT assignments the same questions are decided
exactly by hpdsl/check/prover.py, which reports the same verdict and the same
(first) counterexamples without enumerating; no family is left unchecked.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from hpdsl import ast
from hpdsl.diagnostics import Collector, Note
from hpdsl.check.domain import Assignment, Coverage, Domain, Overlap, Variable
from hpdsl.check.masks import mask_coverage
from hpdsl.check.prover import prove_family
from hpdsl.ir.conditions import condition_from_ast, evaluate, names_in, render_value
from hpdsl.ir.lower_families import lower_family
from hpdsl.ir.nodes import Condition, FamilyIR, Scalar, SelectorIR, VariantIR
from hpdsl.model.axes import CONDITION_AXES

DOMAIN_LIMIT = 200_000
"""Above this many assignments hpdsl/check/layouts.py does not enumerate tp values."""

ENUMERATION_LIMIT = 1_024
"""Above this many assignments coverage is proved by hpdsl/check/prover.py instead of enumerated."""

# --------------------------------------------------------------------------
# The domain
# --------------------------------------------------------------------------


def family_conditions(family: FamilyIR) -> list[Condition]:
    """Return every condition of a family: its requires, then its variants' `when`s."""
    return ([r.condition for r in family.requires]
            + [v.when for v in family.variants if v.when is not None])


def family_domain(family: FamilyIR) -> Domain:
    """Return the finite domain that decides every condition of `family` (see module docs)."""
    used, constants = _reads(family_conditions(family))
    variables = [Variable(s.name, _selector_values(s, constants.get(s.name, set())))
                 for s in family.selectors if s.name in used]
    uses_parallel = "parallel" in used and family.parallel is not None
    for axis in CONDITION_AXES:
        derived = uses_parallel and axis == family.parallel
        if axis in used or derived:
            extra = {1, 2} if derived else {1}
            variables.append(Variable(axis, _int_values(constants.get(axis, set()), extra, 1, None)))
    return Domain(tuple(variables), family.parallel if uses_parallel else None)


def _reads(conditions: Iterable[Condition]) -> tuple[set[str], dict[str, set[int]]]:
    # One walk for both: every name read (names_in), and the int constants each is compared with.
    used: set[str] = set()
    found: dict[str, set[int]] = {}
    stack = list(conditions)
    while stack:
        node = stack.pop()
        stack.extend(node.operands)
        if node.name is None:
            continue
        used.add(node.name)
        for value in (node.value,) if node.op == "cmp" else node.values:
            if isinstance(value, int) and not isinstance(value, bool):
                found.setdefault(node.name, set()).add(value)
    return used, found


def _selector_values(selector: SelectorIR, constants: set[int]) -> tuple[Scalar, ...]:
    if selector.type == "bool":
        return (False, True)
    if selector.type == "enum":
        return selector.values
    ends = {e for e in (selector.low, selector.high) if e is not None}
    extra = ends | {int(selector.default if selector.default is not None else 0)}
    return _int_values(constants, extra, selector.low, selector.high)


def _int_values(constants: set[int], extra: set[int], low: int | None,
                high: int | None) -> tuple[int, ...]:
    values = set(extra)
    for c in constants:
        values |= {c - 1, c, c + 1}
    inside = (v for v in values if (low is None or v >= low) and (high is None or v <= high))
    return tuple(sorted(inside))


# --------------------------------------------------------------------------
# The analysis
# --------------------------------------------------------------------------


def analyse_coverage(family: FamilyIR, *, limit: int = ENUMERATION_LIMIT) -> Coverage:
    """Report what breaks "exactly one variant": over bit sets up to `limit` assignments, proved past it."""
    domain = family_domain(family)
    if domain.size > limit:
        return prove_coverage(family, domain)
    return mask_coverage(family, domain) or enumerate_coverage(family, domain)


def prove_coverage(family: FamilyIR, domain: Domain) -> Coverage:
    """Decide the coverage of `family` over `domain` with hpdsl/check/prover.py, at any size."""
    proved = prove_family(family, [v.name for v in domain.variables],
                          [v.values for v in domain.variables], domain.axis)
    if proved.unsatisfiable is not None:
        return Coverage(domain, unsatisfiable=proved.unsatisfiable)
    return Coverage(domain, overlaps=tuple(Overlap(a, b, env) for a, b, env in proved.overlaps),
                    gap=proved.gap, unreachable=proved.unreachable)


def enumerate_coverage(family: FamilyIR, domain: Domain) -> Coverage:
    """Judge every assignment of `domain` with the runtime's own `evaluate` and `matching_variants` rule."""
    last_failing = -1
    allowed = False
    gap: Assignment | None = None
    overlaps: dict[tuple[str, str], Assignment] = {}
    reached: set[str] = set()
    # violated_requires and matching_variants (hpdsl/ir/conditions.py) unrolled over prepared
    # lists: this loop runs for every assignment of every family a check reads.
    requires = list(enumerate(r.condition for r in family.requires))
    ruled = [(v.name, v.when) for v in family.variants if v.when is not None]
    otherwise = [v.name for v in family.variants if v.default and v.when is None]
    for env in domain.assignments():
        failing = next((i for i, condition in requires if not evaluate(condition, env)), -1)
        if failing >= 0:
            last_failing = max(last_failing, failing)
            continue
        allowed = True
        matched = [name for name, when in ruled if evaluate(when, env)] or otherwise
        reached.update(matched)
        if not matched and gap is None:
            gap = env
        if len(matched) > 1:
            for pair in itertools.combinations(matched, 2):
                overlaps.setdefault(pair, env)
    if not allowed:
        return Coverage(domain, unsatisfiable=last_failing)
    unreachable = tuple(v.name for v in family.variants if not v.default and v.name not in reached)
    found = tuple(Overlap(a, b, env) for (a, b), env in overlaps.items())
    return Coverage(domain, overlaps=found, gap=gap, unreachable=unreachable)


# --------------------------------------------------------------------------
# Counterexamples as text
# --------------------------------------------------------------------------


def describe_assignment(env: Assignment, names: set[str], domain: Domain) -> str:
    """Return `env` as "a=true, ep=2 (parallel)", showing only the variables in `names`."""
    shown = []
    for variable in domain.variables:
        derived = variable.name == domain.axis and "parallel" in names
        if variable.name not in names and not derived:
            continue
        text = f"{variable.name}={render_value(env[variable.name])}"
        if derived:
            text += " (parallel)" if env["parallel"] else " (not parallel)"
        shown.append(text)
    return ", ".join(shown)


def relevant_names(family: FamilyIR, variants: Iterable[str] | None = None) -> set[str]:
    """Return the names read by the `when`s of `variants` (all variants when None)."""
    wanted = None if variants is None else set(variants)
    names: set[str] = set()
    for variant in family.variants:
        if variant.when is not None and (wanted is None or variant.name in wanted):
            names |= names_in(variant.when)
    return names


# --------------------------------------------------------------------------
# The verdict as diagnostics
# --------------------------------------------------------------------------


def family_items(family: ast.Family, kind: type) -> list:
    """Return the statements of `family` of one AST class, in source order."""
    return [item for item in family.items if isinstance(item, kind)]


def report_coverage(family: ast.Family, collector: Collector) -> None:
    """Prove that every allowed assignment selects exactly one variant; report counterexamples."""
    ir = lower_family(family)
    result = analyse_coverage(ir)
    if result.unsatisfiable is not None:
        _report_unsatisfiable(family, result.unsatisfiable, collector)
    else:
        _report_selection(family, ir, result, collector)


def _report_unsatisfiable(family: ast.Family, index: int, collector: Collector) -> None:
    requires: list[ast.Require] = family_items(family, ast.Require)
    culprit = requires[index]
    text = condition_from_ast(culprit.condition).text
    alone = index == 0
    message = (f"'{text}' never holds" if alone else
               f"'{text}' holds for no assignment the requires before it allow")
    collector.error(culprit.condition.span, "require-unsatisfiable",
                    message + ", so every request is rejected",
                    hint="relax or remove a require",
                    notes=tuple(Note(r.condition.span, "a require in force with it")
                                for r in requires[:index]))


def _report_selection(family: ast.Family, ir: FamilyIR, result: Coverage,
                      collector: Collector) -> None:
    variants = {v.name.value: v for v in family_items(family, ast.Variant)}
    for overlap in result.overlaps:
        names = relevant_names(ir, (overlap.first, overlap.second))
        example = describe_assignment(overlap.example, names, result.domain) or "every allowed assignment"
        collector.error(variants[overlap.second].name.span, "variant-overlap",
                        f"{example} matches both '{overlap.first}' and '{overlap.second}'",
                        hint="make the two conditions exclusive, e.g. add `and not ...` to one",
                        notes=(Note(variants[overlap.first].name.span,
                                    f"'{overlap.first}' is declared here"),))
    if result.gap is not None:
        example = describe_assignment(result.gap, relevant_names(ir), result.domain)
        collector.error(family.name.span, "variant-gap",
                        f"{example or 'every allowed assignment'} matches no variant",
                        hint=_gap_hint(ir.variants))
    for name in result.unreachable:
        ruled = variants[name].when is not None
        collector.warning(variants[name].name.span, "variant-unreachable",
                          f"no allowed assignment selects variant '{name}'",
                          hint="its condition never holds where every require holds" if ruled
                          else "give it a `when` condition, or mark it `default`")


def _gap_hint(variants: tuple[VariantIR, ...]) -> str:
    if any(v.default and v.when is not None for v in variants):
        return "drop the default variant's `when` so it catches every other case"
    return "widen a `when` condition, or add a variant for this case"
