"""The device time model against torchtitan's published bf16 and float8 runs on H100.

pytorch/torchtitan, read at commit b5bcd76c66d0acb1a08b176d9639425bc55e0b2a:
benchmarks/llama3_h100_202412_torchtitan.md (Tables 1 and 3: Llama 3.1 8B, FSDP on 8 and 128
GPUs, local batch 2, selective (per-op) activation checkpointing, eager and torch.compile; torch
1963fc8, torchtitan 9dec370) and benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (vanilla
TP, bf16, torch.compile: Llama 3.1 70B on 256 GPUs, FSDP 32 × TP 8, full AC, local batch 16;
Llama 3.1 8B on 64 GPUs, FSDP 8 × TP 8, per-op SAC, local batch 12), and the float8 rows of
llama3_h100_202412_torchtitan.md's Tables 1, 3 and 4 (FSDP + torch.compile + Float8 on 8 and 128
GPUs; Llama 3.1 70B, FSDP 32 × TP 8, full AC, the "2D" row) and the async-TP file's vanilla-TP
"float8 tensorwise" rows (70B and 8B as above). Sequence 8,192 (the
train_configs' seq_len at 9dec370 and 820504e). Measured step = global tokens per step /
(tokens/s per GPU × GPUs), torchtitan's TPS being each rank's tokens over its time and its
non-data-parallel degree. The models are tests/data/torchtitan/llama3.hpf, the machine
tests/data/torchtitan/grand_teton.hpf (96 GB HBM2e, 2.4 TB/s, 500 W H100 hosts).

One parameter is fitted: the machine's matmul-curve scale kappa = 0.624, on the 8-GPU
compiled bf16 FSDP row; the other eight rows are held out. The float8 rows are priced with
`--precision fp8-mixed`: the layers' weight matmuls at the fp8 peak and their casts at memory
bandwidth (docs/cost-model.md#the-device-time-model). Not priced: async TP (hpdsl exposes TP
collectives in full), the eager rows and Table 2's float8 + CP rows (docs/validation.md says why).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "torchtitan"
SEQ = 8192

# row, model, fsdp, tp, local batch, activation checkpointing, precision, measured tokens/s per GPU
ROWS = (
    ("table1-8b-fsdp8", "llama3_8b", 8, 1, 2, "op", "bf16-mixed", 6667.0),
    ("table3-8b-fsdp128", "llama3_8b", 128, 1, 2, "op", "bf16-mixed", 6514.0),
    ("asynctp-70b-fsdp32-tp8", "llama3_70b", 32, 8, 16, "full", "bf16-mixed", 597.3),
    ("asynctp-8b-fsdp8-tp8", "llama3_8b", 8, 8, 12, "op", "bf16-mixed", 4378.0),
    ("table1-8b-fsdp8-float8", "llama3_8b", 8, 1, 2, "op", "fp8-mixed", 8532.0),
    ("table3-8b-fsdp128-float8", "llama3_8b", 128, 1, 2, "op", "fp8-mixed", 8380.0),
    ("table4-70b-fsdp32-tp8-float8", "llama3_70b", 32, 8, 16, "full", "fp8-mixed", 829.0),
    ("asynctp-70b-fsdp32-tp8-float8", "llama3_70b", 32, 8, 16, "full", "fp8-mixed", 809.8),
    ("asynctp-8b-fsdp8-tp8-float8", "llama3_8b", 8, 8, 12, "op", "fp8-mixed", 5078.1),
)
FIT = "table1-8b-fsdp8"
TP_SAC = ("asynctp-8b-fsdp8-tp8", "asynctp-8b-fsdp8-tp8-float8")
"""The rows with both TP and per-op SAC: priced 14 % and 17 % fast, the gap docs/validation.md does not explain."""

# Llama 3.1 8B's projections (hidden 4,096, kv width 8 × 128, SwiGLU width 14,336), in forward order
# wq, wk, wv, wo, w1, w3, w2 (torchtitan/models/llama/model.py at 9dec370)
LLAMA3_8B_MATMULS = (4096 * 4096, 4096 * 1024, 4096 * 1024, 4096 * 4096, 4096 * 14336, 4096 * 14336, 4096 * 14336)
LLAMA3_8B_LAYERS = 32


def op_sac_layers(matmuls: tuple[int, ...], layers: int) -> int:
    """Return the layers whose full recompute reruns the matmul FLOPs torchtitan's per-op SAC reruns.

    Its policy (torchtitan/parallelisms/parallelize_llama.py at 9dec370, `_custom_policy`) saves
    every matmul output but the 2nd, 4th and 6th of a block (wk, wo, w3) and the attention's;
    hpdsl has no such policy, so the run is priced as full recompute of that share of the layers.
    """
    recomputed = sum(size for i, size in enumerate(matmuls, start=1) if i % 2 == 0)
    return round(layers * recomputed / sum(matmuls))


def measured_step(fsdp: int, tp: int, local_batch: int, tokens_per_gpu: float) -> float:
    """Return the measured seconds per step: the step's tokens over tokens/s per GPU times GPUs."""
    return fsdp * local_batch * SEQ / (tokens_per_gpu * fsdp * tp)


def priced_step(model: str, fsdp: int, tp: int, local_batch: int, ac: str, precision: str) -> dict:
    """Return `hpdsl estimate --json` of one run: FSDP as ZeRO-3, compiled kernels fused, flash attention."""
    recompute = ["--recompute", "full"]
    if ac == "op":
        recompute += ["--recompute-layers", str(op_sac_layers(LLAMA3_8B_MATMULS, LLAMA3_8B_LAYERS))]
    machine = str(DATA / "grand_teton.hpf")
    args = [sys.executable, "-m", "hpdsl.cli", "estimate", str(DATA / "llama3.hpf"), "--model", model,
            "--device", machine, "--cluster", machine, "--seq-len", str(SEQ), "--zero", "os+grad+params",
            "--dp", str(fsdp), "--tp", str(tp), "--micro-batch", str(local_batch),
            "--global-batch", str(fsdp * local_batch), "--impl", "fused", "--precision", precision, *recompute,
            "--json"]
    if tp > 1:
        args.append("--sp")  # torchtitan's TP plan shards the norms' sequence (SequenceParallel)
    run = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False, env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def priced() -> dict[str, dict]:
    """Return every row's estimate, priced through the CLI."""
    return {row: priced_step(model, fsdp, tp, batch, ac, precision)
            for row, model, fsdp, tp, batch, ac, precision, _ in ROWS}


@pytest.fixture(scope="module")
def errors(priced: dict[str, dict]) -> dict[str, float]:
    """Return every row's relative error against its measured step."""
    return {row: priced[row]["step_time_s"] / measured_step(fsdp, tp, batch, tps) - 1
            for row, _, fsdp, tp, batch, _, _, tps in ROWS}


def test_per_op_sac_reruns_twelve_layers_worth_of_matmuls() -> None:
    # wk + wo + w3 = 19,456 of 53,248 per 4,096 rows: 36.5 % of 32 layers
    assert op_sac_layers(LLAMA3_8B_MATMULS, LLAMA3_8B_LAYERS) == 12


def test_every_row_is_priced_on_the_benchmarks_hosts(priced: dict[str, dict]) -> None:
    for row, run in priced.items():
        assert run["machine"]["device"] == "h100_grand_teton", row
        assert run["machine"]["cluster"] == "grand_teton" and run["machine"]["time_model"] == "device", row


def test_float8_rows_run_the_layers_matmuls_at_the_fp8_peak(priced: dict[str, dict]) -> None:
    for row, run in priced.items():
        fp8 = row.endswith("float8")
        assert run["machine"]["layer_matmul_dtype"] == ("fp8" if fp8 else "bf16"), row
        assert run["machine"]["layer_matmul_peak_flops"] == (1.979e15 if fp8 else 9.89e14), row
        assert run["machine"]["compute_dtype"] == "bf16", row  # the head and attention's scores stay bf16


def test_the_fitted_row_is_within_one_percent(errors: dict[str, float]) -> None:
    assert abs(errors[FIT]) <= 0.01, f"{FIT}: {errors[FIT]:+.1%}"


@pytest.mark.parametrize("row", [r[0] for r in ROWS if r[0] != FIT and r[0] not in TP_SAC])
def test_each_held_out_row_is_within_ten_percent(row: str, errors: dict[str, float]) -> None:
    assert abs(errors[row]) <= 0.10, f"{row}: {errors[row]:+.1%}"


@pytest.mark.parametrize("row", TP_SAC)
def test_the_tp_and_per_op_sac_rows_are_fast_by_at_most_twenty_percent(row: str, errors: dict[str, float]) -> None:
    assert -0.20 <= errors[row] < 0, f"{row}: {errors[row]:+.1%}"


def test_the_held_out_mean_error_is_within_seven_percent(errors: dict[str, float]) -> None:
    held_out = [abs(e) for row, e in errors.items() if row != FIT]
    assert sum(held_out) / len(held_out) <= 0.07, {row: f"{e:+.1%}" for row, e in errors.items()}
