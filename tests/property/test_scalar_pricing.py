"""One source of formulas, three evaluators held equal: the numpy grid, floats, and the compiled plan.

`estimate` prices one strategy through a plan traced from the grid's own
formulas (hpdsl/cost/formulas/trace.py, hpdsl/cost/price/scalar.py; the first strategy of a
shape on floats, later ones through the compiled plan); `grid_estimate` prices
the same strategy as a grid of one; `price_floats` runs the formulas on plain
floats. For random models (generated, and the shipped examples) and random
strategies every number of the three Estimates is equal, bit for bit; and the
compiled validity check gives the grid rules' reasons, in order, for random
(often invalid) strategies.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hpdsl.api import bind_model
from hpdsl.bound.bind import CostModel
from hpdsl.cost.estimate import effective, estimate, estimate_from_price, grid_estimate
from hpdsl.cost.facts.bounds import bound_reasons
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.feasibility.reasons import check_cache, strategy_reasons
from hpdsl.cost.feasibility.rules import rules
from hpdsl.cost.feasibility.shape import model_shape
from hpdsl.cost.price.prepare import prepare
from hpdsl.cost.price.scalar import PLAN_CHUNKS, plan_key, price_floats
from hpdsl.model.strategy import CP_KINDS, RECOMPUTE, Strategy, ZERO
from test_estimator_props import Spec, specs, strategies

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHIPPED = {name: bind_model([EXAMPLES / f"{name}.hpf"])
           for name in ("llama2_7b", "mixtral_8x7b", "deepseek_v3", "qwen3_next_80b_a3b")}


def _three_agree(cost_model: CostModel, strategy: Strategy) -> None:
    planned = estimate(cost_model, strategy).to_json()
    assert planned == grid_estimate(cost_model, strategy).to_json()
    assert estimate(cost_model, strategy).to_json() == planned  # the first of a shape runs on floats
    prepared = prepare(cost_model)
    resolved = effective(strategy, prepared)
    floats = estimate_from_price(prepared, resolved, price_floats(prepared, resolved)).to_json()
    assert planned == floats


@given(specs(), st.data())
def test_scalar_plan_floats_and_grid_agree_on_generated_models(spec: Spec, data: st.DataObject) -> None:
    cost_model = spec.build()
    for strategy in data.draw(st.lists(strategies(cost_model), min_size=1, max_size=4)):
        _three_agree(cost_model, strategy)


@st.composite
def shipped_strategies(draw: st.DrawFn) -> tuple[CostModel, Strategy]:
    """Draw a shipped model and a strategy for it (mostly valid; the checks decide)."""
    cost_model = SHIPPED[draw(st.sampled_from(sorted(SHIPPED)))]
    tp, pp, cp = (draw(st.sampled_from(v)) for v in ([1, 2, 4, 8], [1, 2, 4], [1, 2]))
    dp = draw(st.sampled_from([1, 2, 4, 8]))
    experts, mesh = cost_model.model.experts or 1, dp * cp * tp
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if experts % e == 0 and mesh % e == 0]))
    strategy = Strategy(
        tp=tp, pp=pp, cp=cp, dp=dp, ep=ep,
        etp=draw(st.sampled_from([1, 2] if experts > 1 and (mesh // ep) % 2 == 0 else [1])),
        vpp=draw(st.sampled_from([1, 2] if pp > 1 else [1])), cp_kind=draw(st.sampled_from(CP_KINDS)),
        sequence_parallel=True if experts > 1 and tp > 1 else draw(st.sampled_from([None, True, False])),
        micro_batch=draw(st.sampled_from([1, 2])), global_batch=draw(st.sampled_from([None, 64, 256])),
        seq_len=draw(st.sampled_from([1024, 4096])), recompute=draw(st.sampled_from(RECOMPUTE)),
        recompute_layers=draw(st.sampled_from([None, 1, 3])), zero=draw(st.sampled_from(ZERO)),
        flash_attention=draw(st.booleans()),
        device=draw(st.sampled_from(["h100", "a100", "mi300x", "@dgx_h100"])),  # a cluster: its tiers' latency
        mfu=draw(st.sampled_from([0.3, 0.55, 0.0])))  # 0: the device time model
    return cost_model, strategy


@given(shipped_strategies())
def test_scalar_plan_and_grid_agree_on_the_shipped_models(drawn: tuple[CostModel, Strategy]) -> None:
    cost_model, strategy = drawn
    if not strategy_reasons(strategy, cost_model):
        _three_agree(cost_model, strategy)


@given(shipped_strategies(), st.sampled_from([0, -1, 3]), st.sampled_from(["bf16-mixed", "fp9", "fp32"]),
       st.sampled_from([0.4, 0.0, 1.5, float("nan")]))
def test_compiled_check_gives_the_grid_rules_reasons(drawn: tuple[CostModel, Strategy], tp: int,
                                                     precision: str, mfu: float) -> None:
    cost_model, strategy = drawn
    strategy = strategy.with_(tp=tp or strategy.tp, precision=precision, mfu=mfu)
    columns = prepare(cost_model).columns
    shape = model_shape(columns)
    grid = StrategyGrid.from_strategies([strategy])
    expected = tuple(rule.message(strategy, shape) for rule in rules(shape) if bool(rule.bad(grid, shape)[0]))
    assert strategy_reasons(strategy, cost_model) == expected
    assert strategy_reasons(strategy, cost_model) == expected  # plain values first, then compiled


@given(specs(), st.data())
def test_a_held_prepared_model_prices_the_second_of_a_shape_through_its_plan(spec: Spec,
                                                                               data: st.DataObject) -> None:
    # The PriceCache is the Prepared's: holding the Prepared is what compiles and reuses the plans.
    cost_model = spec.build()
    prepared = prepare(cost_model)
    for strategy in data.draw(st.lists(strategies(cost_model), min_size=1, max_size=4)):
        floats = estimate(prepared, strategy).to_json()
        assert estimate(prepared, strategy).to_json() == floats
        resolved = effective(strategy, prepared)
        if resolved.pp * resolved.vpp <= PLAN_CHUNKS:
            assert plan_key(resolved) in prepared.cache.plans


@given(shipped_strategies(), st.sampled_from([0, -1, 3]), st.sampled_from(["bf16-mixed", "fp9", "fp32"]))
def test_a_held_check_cache_compiles_the_second_check_of_a_shape(drawn: tuple[CostModel, Strategy], tp: int,
                                                                  precision: str) -> None:
    cost_model, strategy = drawn
    strategy = strategy.with_(tp=tp or strategy.tp, precision=precision)
    expected = strategy_reasons(strategy, cost_model)
    cache = check_cache(prepare(cost_model).columns)
    assert strategy_reasons(strategy, cache) == expected  # plain values
    assert strategy_reasons(strategy, cache) == expected  # compiled
    assert cache.plans or bound_reasons(strategy)
