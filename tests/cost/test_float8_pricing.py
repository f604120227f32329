"""fp8-mixed and fp32 in the device time model: each precision's peak, and what float8 casts (issue 22).

hpdsl/cost/facts/casts.py reads the casts from the layouts; hpdsl/cost/formulas/device_time.py
prices them at memory bandwidth and a layer's weight matmuls at the precision's peak.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from cost_builders import device_text

from hpdsl.api import bind_model
from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.casts import Casts
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.context import scalar_context
from hpdsl.cost.formulas.device_time import cast_bytes
from hpdsl.model.strategy import Strategy

ROOT = Path(__file__).resolve().parents[2]
LLAMA = ROOT / "examples" / "llama3_8b.hpf"
H, Q, KV, F = 4096, 32 * 128, 8 * 128, 14336
"""Llama-3-8B's hidden, query, key/value and feed-forward widths (examples/llama3_8b.hpf)."""


@pytest.fixture(scope="module")
def llama() -> object:
    """Return Llama-3-8B bound to its profile."""
    return bind_model([LLAMA], "llama3_8b")


def test_a_llama_layer_casts_what_its_seven_linears_read_and_write(llama: object) -> None:
    layer = model_columns(llama).columns[0]  # type: ignore[arg-type]
    # q, k, v, gate and up are colwise (their input whole, their outputs split); o and down rowwise.
    assert layer.casts == Casts(colwise_inputs=Fraction(5 * H), split_grads=Fraction(Q + 2 * KV + 2 * F),
                                split_inputs=Fraction(Q + F), grads=Fraction(2 * H),
                                weights=Fraction(H * (2 * Q + 2 * KV) + 3 * H * F))


def test_the_embedding_and_the_head_cast_nothing(llama: object) -> None:
    columns = model_columns(llama).columns  # type: ignore[arg-type]
    assert columns[-2].casts == Casts() and columns[-1].casts == Casts()


def test_the_cast_bytes_follow_tp_and_sequence_parallelism(llama: object) -> None:
    layer = model_columns(llama).columns[0]  # type: ignore[arg-type]
    run = llama.profile.run  # type: ignore[attr-defined]
    plain = scalar_context(Strategy(precision="fp8-mixed", seq_len=1024), run)
    tp = scalar_context(Strategy(tp=2, precision="fp8-mixed", seq_len=1024, sequence_parallel=False), run)
    sp = scalar_context(Strategy(tp=2, precision="fp8-mixed", seq_len=1024, sequence_parallel=True), run)
    tokens, weights = 1024, H * (2 * Q + 2 * KV) + 3 * H * F
    operands = 5 * H + Q + 2 * KV + 2 * F + Q + F + 2 * H
    assert cast_bytes(layer.casts, plain) == (tokens * operands * 8 + weights * 8,
                                              tokens * (5 * H + Q + F) * 5 + weights * 5)
    split = tokens * ((Q + 2 * KV + 2 * F + Q + F) / 2 + 2 * H)
    assert cast_bytes(layer.casts, tp)[0] == (split + tokens * 5 * H) * 8 + weights / 2 * 8
    # Float8 tensor parallelism casts the colwise inputs on the sequence shard, before the all-gather.
    assert cast_bytes(layer.casts, sp)[0] == (split + tokens * 5 * H / 2) * 8 + weights / 2 * 8


def test_fp8_runs_the_layers_matmuls_at_the_fp8_peak_and_pays_for_the_casts(llama: object) -> None:
    strategy = Strategy(tp=8, dp=1, seq_len=4096)
    bf16 = estimate(llama, strategy)  # type: ignore[arg-type]
    fp8 = estimate(llama, strategy.with_(precision="fp8-mixed"))  # type: ignore[arg-type]
    machine = fp8.to_json()["machine"]
    assert machine["layer_matmul_dtype"] == "fp8" and machine["layer_matmul_peak_flops"] == 1.979e15
    assert machine["compute_dtype"] == "bf16" and machine["compute_peak_flops"] == 9.89e14
    assert fp8.flops.per_device == bf16.flops.per_device  # the same work, faster
    compute = (fp8.to_json()["time_breakdown"]["compute_s"], bf16.to_json()["time_breakdown"]["compute_s"])
    # Not twice as fast: scores, the head and the memory-bound kernels stay bf16, and the casts are added.
    assert 0.5 * compute[1] < compute[0] < compute[1]


def test_fp32_prices_every_matmul_at_the_fp32_peak(llama: object) -> None:
    strategy = Strategy(tp=8, dp=1, seq_len=4096)
    bf16 = estimate(llama, strategy)  # type: ignore[arg-type]
    fp32 = estimate(llama, strategy.with_(precision="fp32"))  # type: ignore[arg-type]
    machine = fp32.to_json()["machine"]
    assert machine["layer_matmul_dtype"] == machine["compute_dtype"] == "fp32"
    assert machine["compute_peak_flops"] == 6.7e13  # H100 SXM's FP32, not its 989 TFLOP/s of BF16
    # 14.8 times slower matmuls, fp32 activations at twice the bytes; the collectives move fp32 too.
    compute = (fp32.to_json()["time_breakdown"]["compute_s"], bf16.to_json()["time_breakdown"]["compute_s"])
    assert compute[0] > 10 * compute[1] and fp32.step_time_s > 5 * bf16.step_time_s


def test_a_device_without_an_fp8_peak_prices_fp8_at_bf16_and_says_so(tmp_path: Path) -> None:
    device = tmp_path / "no_fp8.hpf"
    device.write_text(device_text("no_fp8", "test device without an fp8 peak", peak_fp8=None), encoding="utf-8")
    model = bind_model([LLAMA], "llama3_8b")
    priced = estimate(model, Strategy(tp=8, precision="fp8-mixed", device=str(device)))
    machine = priced.to_json()["machine"]
    assert machine["layer_matmul_dtype"] == "bf16" and machine["layer_matmul_peak_flops"] == 9.89e14
    from hpdsl.cli.report import render_estimate

    assert "matmuls at the bf16 peak, 989.00 TFLOP/s; no peak_fp8 stated, so bf16's" in render_estimate(priced)


def test_the_mfu_model_names_no_dtype_peaks(llama: object) -> None:
    machine = estimate(llama, Strategy(tp=8, mfu=0.4)).to_json()["machine"]  # type: ignore[arg-type]
    assert "layer_matmul_dtype" not in machine
