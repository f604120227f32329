"""Strategies, their grid form, the device table, and the reasons a strategy is rejected."""

from __future__ import annotations

import numpy as np
import pytest
from cost_builders import dense_model, example, hybrid_model, moe_model

from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.facts.devices import DEVICES, UnknownDeviceError, get_device
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.feasibility.problems import PROBLEMS, InvalidStrategyError
from hpdsl.cost.feasibility.reasons import require_valid, strategy_problems, validate_strategy
from hpdsl.cost.feasibility.rules import invalid_mask, rules
from hpdsl.cost.feasibility.shape import model_shape
from hpdsl.errors import HpdslError
from hpdsl.model.strategy import Strategy

STRATEGIES = [
    Strategy(),
    Strategy(tp=2, pp=2, dp=4, cp=2, cp_kind="a2a", sequence_parallel=True, micro_batch=2,
             global_batch=64, recompute="selective", zero="os+grad", device="a100", mfu=0.5),
    Strategy(pp=2, vpp=2, pp_split=(1, 1, 1, 1), recompute="full", recompute_layers=1,
             flash_attention=False, num_devices=2, sequence_parallel=False),
]


def test_derived_counts() -> None:
    s = Strategy(tp=2, pp=4, dp=8, cp=2, micro_batch=2)
    assert s.devices == 128
    assert s.batch == 2 * 8 * 4 and s.micro_batches == 4
    assert s.with_(global_batch=256).micro_batches == 16


def test_grid_round_trips_every_field() -> None:
    grid = StrategyGrid.from_strategies(STRATEGIES)
    assert len(grid) == 3
    assert [grid.strategy(i) for i in range(3)] == STRATEGIES


def test_grid_from_arrays_broadcasts_over_defaults() -> None:
    grid = StrategyGrid.from_arrays(3, tp=np.array([1, 2, 4]), seq_len=128)
    assert grid.strategy(2) == Strategy(tp=4, seq_len=128)
    with pytest.raises(TypeError, match="unknown grid fields"):
        StrategyGrid.from_arrays(1, tensor=2)


def test_devices_are_data_with_sources() -> None:
    assert get_device("H100").peak_flops == 989e12
    assert get_device("h200").memory_bytes == 141 * 1024**3
    assert get_device("A100").peak_flops == 312e12
    assert get_device("MI300X").memory_bytes == 192 * 1024**3
    assert get_device("910B").memory_bytes == 64 * 1024**3
    assert all(d.source for d in DEVICES.values())
    with pytest.raises(UnknownDeviceError, match="did you mean 'h100'"):
        get_device("h10")


def test_a_valid_strategy_has_no_reasons() -> None:
    assert validate_strategy(Strategy(tp=2, pp=2, dp=2), dense_model()) == ()


@pytest.mark.parametrize(("strategy", "reason"), [
    (Strategy(tp=3), "tp 3 does not divide the 8 attention heads"),
    (Strategy(tp=0), "tp must be at least 1, got 0"),
    (Strategy(pp=5), "5 pipeline chunks (pp·vpp) for 4 layers"),
    (Strategy(pp=2, vpp=3), "6 pipeline chunks (pp·vpp) for 4 layers"),
    (Strategy(pp=2, pp_split=(1, 2)), "pp_split sums to 3 layers, but the model has 4"),
    (Strategy(pp=2, pp_split=(4,)), "pp_split lists 1 chunks, but pp·vpp = 2"),
    (Strategy(pp=2, pp_split=(5, -1)), "pp_split has a negative layer count"),
    (Strategy(dp=2, tp=2, num_devices=8), "dp·tp·pp·cp = 4, but the job has 8 devices"),
    (Strategy(tp=4, num_devices=6), "tp 4 does not divide the 6 devices"),
    (Strategy(ep=2), "ep 2 / etp 1: the model has no routed experts to shard"),
    (Strategy(dp=2, micro_batch=2, global_batch=6), "global batch 6 is not a multiple of micro_batch·dp = 4"),
    (Strategy(vpp=2), "vpp 2 needs pipeline parallelism (pp > 1)"),
    (Strategy(pp=2, vpp=2, global_batch=3), "the interleaved schedule needs the 3 micro-batches"),
    (Strategy(cp=2, seq_len=4094), "seq_len 4094 is not divisible by 2·cp = 4"),
    (Strategy(cp=16, cp_kind="a2a"), "all-to-all context parallelism needs tp·cp = 16"),
    (Strategy(recompute="some"), "recompute 'some' is not one of none, selective, full"),
    (Strategy(zero="zero3"), "zero 'zero3' is not one of"),
    (Strategy(cp_kind="star"), "cp_kind 'star' is not one of ring, a2a"),
    (Strategy(device="tpu"), "unknown device 'tpu'"),
    (Strategy(mfu=1.5), "mfu must be in [1e-06, 1], got 1.5"),
    (Strategy(mfu=1e-300), "mfu must be in [1e-06, 1], got 1e-300"),  # step time inf (bench/fuzz.py, seed 4)
])
def test_reasons(strategy: Strategy, reason: str) -> None:
    reasons = validate_strategy(strategy, dense_model(heads=8, kv_heads=4))
    assert any(reason in r for r in reasons), reasons


def test_kv_heads_and_widths() -> None:
    reasons = validate_strategy(Strategy(tp=4), dense_model(heads=8, kv_heads=2, ffn_width=1026))
    assert reasons == ("tp 4 does not divide the 2 kv heads", "tp 4 does not divide the feed-forward width 1026")


def test_expert_rules() -> None:
    cost_model = moe_model(experts=8)
    assert validate_strategy(Strategy(dp=4, ep=4), cost_model) == ()
    reasons = validate_strategy(Strategy(dp=4, ep=3, tp=2, sequence_parallel=False), cost_model)
    assert "ep 3 does not divide the 8 routed experts" in reasons
    assert any("ep·etp = 3 does not divide dp·cp·tp = 8" in r for r in reasons)
    assert any("needs sequence parallelism" in r for r in reasons)
    assert any("etp 3 does not divide the expert width 128" in r
               for r in validate_strategy(Strategy(dp=3, etp=3), cost_model))


def test_linear_attention_heads_bound_tp() -> None:
    reasons = validate_strategy(Strategy(tp=8), hybrid_model())
    assert "tp 8 does not divide the 4 linear-attention key heads" in reasons
    assert "tp 8 does not divide the 2 kv heads" in reasons


def test_invalid_strategy_raises_one_error_with_every_reason() -> None:
    with pytest.raises(InvalidStrategyError) as caught:
        require_valid(Strategy(tp=3, pp=9), dense_model())
    error = caught.value
    assert isinstance(error, HpdslError)
    assert len(error.reasons) >= 2
    assert all(reason in str(error) for reason in error.reasons)


def test_grid_mask_and_single_reasons_agree() -> None:
    cost_model = moe_model()
    strategies = [Strategy(tp=t, dp=d, ep=e, pp=p, sequence_parallel=sp)
                  for t in (1, 2, 3) for d in (1, 2, 4) for e in (1, 2, 3) for p in (1, 5)
                  for sp in (False, True)]
    mask = invalid_mask(model_columns(cost_model), StrategyGrid.from_strategies(strategies))
    assert list(mask) == [bool(validate_strategy(s, cost_model)) for s in strategies]
    assert 0 < mask.sum() < len(strategies)


def test_examples_accept_their_usual_layouts() -> None:
    assert validate_strategy(Strategy(tp=8, pp=8, dp=2, ep=8, sequence_parallel=True),
                             example("deepseek_v3")) == ()
    assert validate_strategy(Strategy(tp=2, dp=4, ep=8, sequence_parallel=True),
                             example("qwen3_next_80b_a3b")) == ()


def test_every_rule_has_a_documented_problem_code() -> None:
    shape = model_shape(model_columns(moe_model()))
    codes = {rule.code for rule in rules(shape)} | {rule.code for rule in rules(model_shape(model_columns(
        dense_model())))}
    assert codes <= set(PROBLEMS), sorted(codes - set(PROBLEMS))


def test_a_refused_strategy_carries_its_problems_coded_and_its_reasons_as_text() -> None:
    strategy = Strategy(tp=3, pp=9, precision="fp9")
    problems = strategy_problems(strategy, dense_model())
    assert {"tp-heads", "unknown-precision"} <= {p.code for p in problems}
    assert tuple(p.message for p in problems) == validate_strategy(strategy, dense_model())
    with pytest.raises(InvalidStrategyError) as raised:
        require_valid(strategy, dense_model())
    assert raised.value.problems == problems
    assert raised.value.reasons == tuple(p.message for p in problems)
    assert strategy_problems(Strategy(tp=2**70), dense_model())[0].code == "past-bound"


def test_tp_must_divide_the_vocabulary_rows_the_build_splits() -> None:
    """The token table splits by rows over tp and an untied head by its vocab rows: the build refuses an uneven tp."""
    assert validate_strategy(Strategy(tp=2), dense_model(vocab=1001)) == (
        "tp 2 does not divide the vocabulary (the token table's rows) 1001",
        "tp 2 does not divide the vocabulary (the output head's rows) 1001")
    assert validate_strategy(Strategy(tp=2), dense_model(vocab=1001, tie=True)) == (
        "tp 2 does not divide the vocabulary (the token table's rows) 1001",)
    assert validate_strategy(Strategy(tp=2), dense_model(vocab=1002)) == ()


def test_tp_must_divide_the_mtp_projections_split_rows_its_layout_declares() -> None:
    """families/projection.hpf splits eh_proj's hidden rows colwise: the build refuses a tp that does not divide them."""
    refused = "tp 3 does not divide the MTP layers' eh_proj.weight dim 0 256"
    assert refused in validate_strategy(Strategy(tp=3), dense_model(mtp=1))
    assert not any("MTP" in reason for reason in validate_strategy(Strategy(tp=3), dense_model()))
    assert validate_strategy(Strategy(tp=2), dense_model(mtp=1)) == ()

