"""Family coverage properties over hypothesis-generated small families.

- The static verdict (require-unsatisfiable, variant-overlap, variant-gap,
  variant-unreachable) equals a brute-force evaluation over the *full* domain
  (every bool, every enum value, axis sizes 1..5) with `evaluate`, so the
  representative domain of hpdsl/check/coverage.py loses nothing.
- Reordering the variants or the requires never changes the set of codes.

Families are generated as .hpf text and go through the real parser.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import attrs
from family_strategies import FamilySpec, family_specs
from hypothesis import given
from hypothesis import strategies as st

from hpdsl import ast
from hpdsl.check.families import check_family
from hpdsl.diagnostics import Collector
from hpdsl.ir.conditions import evaluate
from hpdsl.ir.lower_families import lower_family
from hpdsl.ir.nodes import FamilyIR, Scalar
from hpdsl.syntax import parse_text

AXIS_SIZES = range(1, 6)  # constants are at most 3, so 1..5 reaches every interval
COVERAGE_CODES = {"require-unsatisfiable", "variant-overlap", "variant-gap", "variant-unreachable"}


def _codes(spec: FamilySpec) -> list[tuple[str, str]]:
    family = parse_text(spec.text()).items[0]
    assert isinstance(family, ast.Family)
    collector = Collector()
    check_family(family, collector)
    return [(d.code, d.message) for d in collector.sorted()]


def _full_domain(spec: FamilySpec, ir: FamilyIR) -> list[dict[str, Scalar]]:
    names = [*spec.bools, *(e for e, _ in spec.enums), *spec.axes()]
    values: list[Sequence[Scalar]] = [*([False, True] for _ in spec.bools),
                                      *(vs for _, vs in spec.enums),
                                      *(AXIS_SIZES for _ in spec.axes())]
    envs = []
    for combo in itertools.product(*values):
        env: dict[str, Scalar] = dict(zip(names, combo, strict=True))
        if ir.parallel:
            env["parallel"] = int(env[ir.parallel]) > 1
        envs.append(env)
    return envs


def _brute_matches(ir: FamilyIR, env: dict[str, Scalar]) -> list[str]:
    # Written from the contract, independently of hpdsl.ir.conditions.matching_variants.
    ruled = [v.name for v in ir.variants if v.when is not None and evaluate(v.when, env)]
    otherwise = [v.name for v in ir.variants if v.default and v.when is None]
    return ruled or otherwise


def _brute_verdict(spec: FamilySpec) -> set[str]:
    ir = lower_family(parse_text(spec.text()).items[0])  # type: ignore[arg-type]
    allowed = [env for env in _full_domain(spec, ir)
               if all(evaluate(r.condition, env) for r in ir.requires)]
    if not allowed:
        return {"require-unsatisfiable"}
    matches = [_brute_matches(ir, env) for env in allowed]
    verdict = set()
    if any(len(m) > 1 for m in matches):
        verdict.add("variant-overlap")
    if any(not m for m in matches):
        verdict.add("variant-gap")
    reached = set().union(*map(set, matches))
    if any(not v.default and v.name not in reached for v in ir.variants):
        verdict.add("variant-unreachable")
    return verdict


@given(family_specs())
def test_static_verdict_equals_brute_force(spec: FamilySpec) -> None:
    found = _codes(spec)
    codes = {code for code, _ in found}
    assert codes <= COVERAGE_CODES, found
    assert codes == _brute_verdict(spec), spec.text()


@given(family_specs())
def test_unreachable_warnings_name_exactly_the_dead_variants(spec: FamilySpec) -> None:
    ir = lower_family(parse_text(spec.text()).items[0])  # type: ignore[arg-type]
    allowed = [env for env in _full_domain(spec, ir)
               if all(evaluate(r.condition, env) for r in ir.requires)]
    reached = set().union(set(), *(set(_brute_matches(ir, env)) for env in allowed))
    dead = {f"no allowed assignment selects variant '{v.name}'" for v in ir.variants
            if allowed and not v.default and v.name not in reached}
    assert {m for c, m in _codes(spec) if c == "variant-unreachable"} == dead


@given(family_specs(), st.data())
def test_order_of_variants_and_requires_never_changes_the_codes(spec: FamilySpec,
                                                               data: st.DataObject) -> None:
    variants = data.draw(st.permutations(spec.variants))
    requires = data.draw(st.permutations(spec.requires))
    shuffled = attrs.evolve(spec, variants=tuple(variants), requires=tuple(requires))
    assert {c for c, _ in _codes(shuffled)} == {c for c, _ in _codes(spec)}
