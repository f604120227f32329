"""AxisSizes and condition_inputs (hpdsl/model/axes.py) properties.

- AxisSizes rejects every invalid degree (bools, zero, negatives, non-ints) with
  an AxisSizeError naming the axis and the value, and round-trips every valid
  one (keywords and the cattrs converter).
- validate_world refuses exactly what the estimator's strategy check refuses
  for the device count and the expert mesh (hpdsl/cost/feasibility/rules.py).
- The checker's coverage domain (hpdsl/check/coverage.py) and condition_inputs,
  which resolution and the estimator use, give every condition of a family the
  same value on every assignment, so what the checker proves holds at run time.
"""

from __future__ import annotations

import pytest
from family_strategies import FamilySpec, defaulted_family_specs
from hypothesis import given
from hypothesis import strategies as st

from hpdsl.bound.bind import CostModel
from hpdsl.check.coverage import family_conditions, family_domain
from hpdsl.cost import bind
from hpdsl.cost.feasibility.reasons import validate_strategy
from hpdsl.ir.conditions import evaluate
from hpdsl.ir.convert import structure, unstructure
from hpdsl.ir.lower_families import lower_family
from hpdsl.ir.nodes import FamilyIR, KindIR, LayerGroup, ModelIR, ProfileIR
from hpdsl.model.axes import CONDITION_AXES, STRATEGY_AXES, AxisSizeError, AxisSizes, condition_inputs
from hpdsl.model.strategy import Strategy
from hpdsl.syntax import parse_text

degrees = st.integers(1, 64)
axis_sizes = st.builds(AxisSizes, **{axis: degrees for axis in STRATEGY_AXES})
invalid_degrees = st.one_of(
    st.integers(max_value=0), st.booleans(), st.floats(allow_nan=False), st.text(max_size=3), st.none(),
    st.integers(1, 8).map(str), st.integers(1, 8).map(float), st.tuples(st.integers(1, 8)),
)


@given(st.sampled_from(STRATEGY_AXES), invalid_degrees, axis_sizes)
def test_every_invalid_degree_is_refused_naming_the_axis_and_the_value(axis: str, value: object,
                                                                        valid: AxisSizes) -> None:
    others = {a: s for a, s in valid.as_dict().items() if a != axis}
    with pytest.raises(AxisSizeError) as raised:
        AxisSizes(**others, **{axis: value})
    assert raised.value.axis == axis and raised.value.value is value
    assert f"the {axis} degree" in raised.value.message and repr(value) in raised.value.message


@given(axis_sizes)
def test_valid_sizes_round_trip(sizes: AxisSizes) -> None:
    assert AxisSizes(**sizes.as_dict()) == sizes
    assert structure(unstructure(sizes), AxisSizes) == sizes
    assert all(sizes.active(axis) == (sizes.size(axis) > 1) for axis in STRATEGY_AXES)
    assert sizes.as_dict(CONDITION_AXES) == {axis: getattr(sizes, axis) for axis in CONDITION_AXES}


def _moe_cost_model() -> CostModel:
    ops = {"attMM": 1, "attBMM": 1, "ffMM": 1, "softmax": 1, "normOp": 1}
    model = ModelIR("m", "p", hidden=4096, layers=4, heads=64, vocab=512, kv_heads=64, head_dim=64,
                    ffn_width=4096, experts=4096, top_k=2, expert_width=4096,
                    groups=(LayerGroup("full", 4),))
    return bind(model, ProfileIR("p", {"full": KindIR("full", ops)}, default="full"))


MOE = _moe_cost_model()
WORLD_REASONS = ("devices", "does not divide dp·cp·tp")


@given(st.builds(AxisSizes, **{axis: st.sampled_from([1, 2, 3, 4, 8]) for axis in STRATEGY_AXES}),
       st.sampled_from([1, 2, 4, 8, 16, 24, 64]))
def test_validate_world_refuses_what_the_estimator_refuses(sizes: AxisSizes, world: int) -> None:
    strategy = Strategy(tp=sizes.tp, pp=sizes.pp, dp=sizes.dp, cp=sizes.cp, ep=sizes.ep, etp=sizes.etp,
                        num_devices=world)
    refused = [r for r in validate_strategy(strategy, MOE) if any(w in r for w in WORLD_REASONS)]
    try:
        sizes.validate_world(world)
    except AxisSizeError as exc:
        assert exc.message in refused
    else:
        assert refused == []


def _family(spec: FamilySpec) -> FamilyIR:
    return lower_family(parse_text(spec.text()).items[0])  # type: ignore[arg-type]


@given(defaulted_family_specs())
def test_the_checker_and_resolution_evaluate_conditions_on_the_same_inputs(spec: FamilySpec) -> None:
    family = _family(spec)
    domain = family_domain(family)
    conditions = family_conditions(family)
    selectors = {s.name for s in family.selectors}
    for env in domain.assignments():
        sizes = AxisSizes(**{a: int(v) for a, v in env.items() if a in CONDITION_AXES})
        inputs = condition_inputs(family, sizes, {n: v for n, v in env.items() if n in selectors})
        assert [evaluate(c, env) for c in conditions] == [evaluate(c, inputs) for c in conditions]
