"""What a context-parallel Gated DeltaNet keeps of the previous rank's hand-off (hpdsl/cost/formulas/handoff.py)."""

from __future__ import annotations

import pytest
from cost_builders import example

from hpdsl.bound.bind import LayerConfig
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.handoff import carried
from hpdsl.cost.formulas.memory import layer_activation_bytes
from hpdsl.ir.nodes import RunFacts
from hpdsl.model.strategy import Strategy

CP2 = Strategy(cp=2, precision="fp32", seq_len=4096)


def _layers() -> list[LayerConfig]:
    return list(model_columns(example("qwen3_next_80b_a3b")).configs)


def _linear() -> LayerConfig:
    return next(cfg for cfg in _layers() if cfg.attn_kind == "linear")


def _per_sequence(cfg: LayerConfig, strategy: Strategy) -> float:
    # Per-token terms double with the sequence; what a rank keeps once per sequence does not.
    once, twice = (layer_activation_bytes(cfg, RunFacts(), strategy.with_(seq_len=s))[0]
                   for s in (strategy.seq_len, 2 * strategy.seq_len))
    return 2 * once - twice


def test_qwen3_next_keeps_the_convolution_tail_and_the_fp32_state() -> None:
    # conv 4; q, k: 16 heads of 128; v: 32 heads of 128 -> 8,192 channels; state 32 x 128 x 128 fp32.
    assert carried(_linear()) == (3 * 8192, 4 * 32 * 128 * 128)
    assert _per_sequence(_linear(), CP2) == pytest.approx(4 * 3 * 8192 + 4 * 32 * 128 * 128)


def test_nothing_is_carried_without_cp_or_outside_the_delta_rule() -> None:
    assert _per_sequence(_linear(), CP2.with_(cp=1)) == pytest.approx(0.0)
    assert all(carried(cfg) == (0.0, 0.0) for cfg in _layers() if cfg.attn_kind != "linear")


def test_tp_splits_the_hand_off_by_heads() -> None:
    assert _per_sequence(_linear(), CP2.with_(tp=2)) == pytest.approx(_per_sequence(_linear(), CP2) / 2)
