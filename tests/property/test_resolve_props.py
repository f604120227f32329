"""Resolution and job-binding properties, on the production paths (hpdsl.torch.resolve and build).

- Resolving a request against axis sizes follows the family's contract, written
  out here independently of hpdsl.model.axes.condition_inputs: selector
  defaults, explicit selectors over them, the axes, `parallel`; the first
  violated require refuses the request with its message; otherwise exactly one
  matching variant is chosen, and none or several is refused.
- The same request against the same sizes picks the same variant, however the
  sizes are given (a context mapping or a JobContext).
- A module built on one mesh (a fake process group: hpdsl/torch/fake.py) fails
  validate_family_context against any other mesh, and passes on its own.

Families are generated as .hpf text (family_strategies.py) and go through the real parser.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from family_strategies import FamilySpec, defaulted_family_specs
from hypothesis import given, settings
from hypothesis import strategies as st

from hpdsl.errors import BuildError, ResolutionError
from hpdsl.ir.conditions import evaluate
from hpdsl.ir.lower_families import lower_family
from hpdsl.ir.nodes import FamilyIR, Scalar
from hpdsl.model.axes import CONDITION_AXES, STAGE_MESH_AXES, AxisSizes
from hpdsl.syntax import parse_text
from hpdsl.torch import (
    FamilyRequest, JobContext, ModuleConfig, ResolvedFamily, build_family, resolve_family, standard_registry,
    validate_family_context,
)
from hpdsl.torch.fake import fake_job

PATH = "hpdsl.torch.modules:PlainMLP"  # a real constructor naming `config`; resolution never calls it
CFG = ModuleConfig(hidden=32, heads=4, head_dim=8, kv_heads=2, ffn_width=64, experts=4, top_k=2)

sizes = st.builds(AxisSizes, **{axis: st.integers(1, 5) for axis in CONDITION_AXES})


def _family(spec: FamilySpec) -> FamilyIR:
    return lower_family(parse_text(spec.text(PATH)).items[0])  # type: ignore[arg-type]


@st.composite
def requests(draw: st.DrawFn) -> tuple[FamilySpec, dict[str, Scalar]]:
    """Draw a family with defaults and an explicit value for some of its selectors."""
    spec = draw(defaulted_family_specs())
    choices: dict[str, list[Scalar]] = {b: [False, True] for b in spec.bools}
    choices.update({e: list(values) for e, values in spec.enums})
    named = draw(st.lists(st.sampled_from(sorted(choices)), unique=True)) if choices else []
    return spec, {name: draw(st.sampled_from(choices[name])) for name in named}


def _contract_env(family: FamilyIR, job: AxisSizes, explicit: dict[str, Scalar]) -> dict[str, Scalar]:
    # Written from docs/language.md's contract, not with hpdsl.model.axes.
    env: dict[str, Scalar] = {s.name: s.default for s in family.selectors if s.default is not None}
    env.update(explicit)
    env.update({"tp": job.tp, "cp": job.cp, "ep": job.ep, "pp": job.pp, "etp": job.etp})
    env["parallel"] = family.parallel is not None and getattr(job, family.parallel) > 1
    return env


def _context(job: AxisSizes) -> dict[str, Any]:
    return {f"{axis}_size": job.size(axis) for axis in CONDITION_AXES}


@given(requests(), sizes)
def test_resolution_follows_the_contract(request: tuple[FamilySpec, dict[str, Scalar]], job: AxisSizes) -> None:
    spec, explicit = request
    family = _family(spec)
    env = _contract_env(family, job, explicit)
    violated = [r for r in family.requires if not evaluate(r.condition, env)]
    ruled = [v.name for v in family.variants if v.when is not None and evaluate(v.when, env)]
    matches = ruled or [v.name for v in family.variants if v.default and v.when is None]
    if violated or len(matches) != 1:
        expected = (re.escape(violated[0].message) if violated else
                    "no variant matches" if not matches else "all match .*; exactly one must")
        with pytest.raises(ResolutionError, match=expected):
            resolve(FamilyRequest(family, explicit), _context(job))
        return
    resolved = resolve(FamilyRequest(family, explicit), _context(job))
    assert resolved.variant.name == matches[0]
    assert dict(resolved.selectors) == {s.name: env[s.name] for s in family.selectors}
    assert resolved.parallel is env["parallel"] and resolved.axis_sizes == job


@given(requests(), sizes)
def test_the_same_request_and_sizes_always_pick_the_same_variant(
        request: tuple[FamilySpec, dict[str, Scalar]], job: AxisSizes) -> None:
    spec, explicit = request
    family = _family(spec)
    outcomes = {_outcome(FamilyRequest(family, explicit), context)
                for context in (_context(job), JobContext(job), _context(job), JobContext(job))}
    outcomes.add(_outcome(FamilyRequest(_family(spec), dict(explicit)), _context(job)))
    assert len(outcomes) == 1, outcomes


@given(requests(), sizes)
def test_explicit_selectors_override_their_defaults(request: tuple[FamilySpec, dict[str, Scalar]],
                                                   job: AxisSizes) -> None:
    spec, explicit = request
    family = _family(spec)
    defaults = {s.name: s.default for s in family.selectors}
    stated = _outcome(FamilyRequest(family, explicit), _context(job))
    # Stating every selector, the unstated ones at their defaults, resolves the same way.
    assert _outcome(FamilyRequest(family, {**defaults, **explicit}), _context(job)) == stated
    try:
        resolved = resolve(FamilyRequest(family, explicit), _context(job))
    except ResolutionError:
        return
    assert {n: resolved.selectors[n] for n in explicit} == explicit
    assert all(resolved.selectors[n] == v for n, v in defaults.items() if n not in explicit)


def resolve(request: FamilyRequest, context: Any) -> ResolvedFamily:
    """Resolve on the production path (the public function)."""
    return resolve_family(request, context, module_fqn="layers.0.mixer")


def _outcome(request: FamilyRequest, context: Any) -> str:
    try:
        return "variant " + resolve(request, context).variant.name
    except ResolutionError as exc:
        return "refused: " + exc.message


# --------------------------------------------------------------------------
# Modules bound to their job's mesh
# --------------------------------------------------------------------------

# tp divides the 4 heads and 2 kv heads of CFG; ep divides its 4 experts.
mesh_sizes = st.builds(AxisSizes, tp=st.sampled_from([1, 2]), cp=st.sampled_from([1, 2, 4]),
                       ep=st.sampled_from([1, 2, 4])).filter(
    lambda s: any(s.active(axis) for axis in STAGE_MESH_AXES))  # a job with a mesh


@settings(max_examples=20)
@given(st.sampled_from(["attention", "grouped_experts"]), mesh_sizes, mesh_sizes)
def test_a_module_built_for_one_mesh_fails_validation_on_any_other(family: str, built_for: AxisSizes,
                                                                   other: AxisSizes) -> None:
    registry = standard_registry()
    with fake_job(built_for) as mesh:
        module = build_family(family, config=CFG, mesh=mesh, registry=registry, module_fqn="layers.0.x")
        validate_family_context(module, mesh=mesh)  # its own mesh
    with fake_job(other) as another:
        with pytest.raises(BuildError, match=f"family '{family}'"):
            validate_family_context(module, mesh=another)
