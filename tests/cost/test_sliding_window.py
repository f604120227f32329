"""Sliding-window layers priced with their window: executed FLOPs, the model convention, context parallelism.

A gpt-oss-shaped model (alternating sliding and full attention layers) is
estimated beside the same model whose window covers the whole sequence: every
difference is the sliding layers' score work, and it must be exactly what the
band formulas of docs/cost-model.md#sliding-window-attention say.
"""

from __future__ import annotations

import pytest
from cost_builders import bound
from hypothesis import given, strategies as st

from hpdsl.bound.bind import CostModel
from hpdsl.cost.estimate import estimate
from hpdsl.cost.formulas.flops import (BACKWARD, SOFTMAX, HEAD_CAST, attended_keys, causal_window_keys,
                              forward_flops_by_term)
from hpdsl.model.strategy import Strategy

H, A, KV, D, FFN, E, K, V = 256, 8, 2, 32, 128, 8, 2, 1000
SEQ = 4096

SPEC = """model sw : gpt_oss {{
  hidden {h}
  layers 4
  heads {a}
  kv_heads {kv}
  head_dim {d}
  vocab {v}
  ffn_width {ffn}
  sliding_window {w}
  tie_embeddings false
  moe {{ experts {e}  top_k {k}  expert_width {ffn}  router_bias true }}
  stack [sliding_attention, full_attention] * 2
}}
"""


def model(window: int) -> CostModel:
    """Return the bound gpt-oss-shaped model with sliding layers of `window`."""
    return bound(SPEC.format(h=H, a=A, kv=KV, d=D, v=V, ffn=FFN, w=window, e=E, k=K), "sw")


def run(cost_model: CostModel, *, flash: bool = True, cp: int = 1) -> dict[str, float]:
    """Return the estimate's FLOPs and ring traffic for one sequence of SEQ tokens."""
    est = estimate(cost_model, Strategy(cp=cp, seq_len=SEQ, flash_attention=flash))
    return {"forward": est.flops.forward, "model": est.flops.model_total,
            "device": est.flops.per_device, "cp": est.communication["cp"]}


def score_per_key() -> float:
    """Return one layer's forward score FLOPs per query and key: QKᵀ, A·V, softmax, the score cast."""
    return A * (4 * D) + A * (SOFTMAX + HEAD_CAST)


@given(st.integers(1, 10_000), st.integers(1, 10_000))
def test_the_band_is_the_causal_area_under_the_window(seq: int, window: int) -> None:
    # Query i (0-based) sees min(i + 1, w) keys, s·w − w(w−1)/2 in all when w ≤ s; the
    # continuous area, s·w − w²/2, is to it what s²/2 is to the causal s(s+1)/2.
    w = min(window, seq)
    exact = sum(min(i + 1, window) for i in range(seq))
    assert exact == seq * w - w * (w - 1) // 2
    assert causal_window_keys(float(seq), window) * seq == pytest.approx(seq * w - w * w / 2)
    assert causal_window_keys(float(seq), 0) == seq / 2
    assert attended_keys(float(seq), window) == w


def test_flash_runs_the_band_and_eager_the_whole_square() -> None:
    w = 128
    windowed, whole = model(w), model(SEQ)
    flash = run(windowed)["forward"] - run(whole)["forward"]
    band = SEQ * (causal_window_keys(float(SEQ), w) - SEQ / 2)  # two sliding layers, per query
    assert flash == pytest.approx(2 * band * score_per_key(), rel=1e-12)
    # Without flash the square is computed, then masked: the window changes nothing.
    assert run(windowed, flash=False)["forward"] == run(whole, flash=False)["forward"]


def test_the_model_convention_counts_the_attended_keys() -> None:
    w = 128
    windowed, whole = model(w), model(SEQ)
    fewer = run(whole)["model"] - run(windowed)["model"]
    # 3 × (QKᵀ + A·V, 2·a·d_h each) per query over s − w keys fewer, in two sliding layers.
    assert fewer == pytest.approx(3 * 2 * SEQ * (SEQ - w) * A * 4 * D, rel=1e-12)
    assert run(model(2 * SEQ))["model"] == run(whole)["model"]  # a window past s is no window


def test_the_term_breakdown_prices_the_window_when_asked() -> None:
    w = 64
    terms = forward_flops_by_term(model(w), batch=2, seq_len=512)
    banded = forward_flops_by_term(model(w), batch=2, seq_len=512, windowed=True)
    assert banded["full_attention"] == terms["full_attention"]
    assert terms["sliding_attention"]["attBMM"] == 2 * 512 * 512 * A * 4 * D
    assert banded["sliding_attention"]["attBMM"] == 2 * 512 * w * A * 4 * D
    assert banded["sliding_attention"]["ffMM"] == terms["sliding_attention"]["ffMM"]


def test_context_parallel_ranks_price_the_window() -> None:
    w = 128
    windowed, whole = model(w), model(SEQ)
    one, two = run(windowed), run(windowed, cp=2)
    # Each rank runs half the queries over the same band: the per-device FLOPs halve.
    assert two["device"] == pytest.approx(one["device"] / 2, rel=1e-12)
    # cp 8: chunks of 4096/16 = 256 positions, a window of 128 reaches m = 1 chunk back, so a
    # rank's keys and values go to its two ring neighbours instead of all 7 other ranks.
    eight_w, eight = run(windowed, cp=8), run(whole, cp=8)
    kv_bytes = 2 * (2 * KV * D) * SEQ / 8  # bf16 keys and values of one rank's chunk, per layer
    # Forward + backward (3 passes) in the two sliding layers.
    assert eight["cp"] - eight_w["cp"] == pytest.approx(3 * 2 * kv_bytes * (7 - 2), rel=1e-12)
    assert run(windowed, cp=2)["cp"] == run(whole, cp=2)["cp"]  # 2m ≥ cp − 1: no saving


def test_backward_stays_twice_the_forward_plus_the_banded_recompute() -> None:
    w = 256
    est = estimate(model(w), Strategy(seq_len=SEQ))
    whole = estimate(model(SEQ), Strategy(seq_len=SEQ))
    band = SEQ * (causal_window_keys(float(SEQ), w) - SEQ / 2)
    recompute = A * D * 2 + A * SOFTMAX + A * HEAD_CAST  # what the flash backward runs again (QKᵀ, softmax, cast)
    fewer = whole.flops.backward - est.flops.backward
    assert fewer == pytest.approx(-2 * band * (BACKWARD * score_per_key() + recompute), rel=1e-12)


@pytest.mark.parametrize("cp,cp_kind,flash", [(1, "ring", True), (1, "ring", False), (4, "ring", True),
                                              (8, "ring", False), (4, "a2a", True)])
def test_floats_plan_and_grid_price_the_window_alike(cp: int, cp_kind: str, flash: bool) -> None:
    from hpdsl.cost.estimate import effective, estimate_from_price, grid_estimate
    from hpdsl.cost.price.prepare import prepare
    from hpdsl.cost.price.scalar import price_floats

    cost_model = model(128)
    strategy = Strategy(cp=cp, cp_kind=cp_kind, seq_len=SEQ, flash_attention=flash)
    planned = estimate(cost_model, strategy).to_json()
    assert planned == grid_estimate(cost_model, strategy).to_json()
    assert estimate(cost_model, strategy).to_json() == planned  # the first of a shape ran on floats
    prepared = prepare(cost_model)
    resolved = effective(strategy, prepared)
    assert estimate_from_price(prepared, resolved, price_floats(prepared, resolved)).to_json() == planned
