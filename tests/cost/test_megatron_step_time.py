"""The device time model against Megatron-LM's measured iteration times.

Korthikanti et al. (2022), "Reducing Activation Recomputation in Large Transformer
Models" (arXiv:2205.05198), Table 5: the iteration time in seconds of four GPT-3-style
models on A100-80GB, tp 8, seq 2,048, with full recompute, and with sequence parallelism
plus selective recompute (the "present work" column). The parallel configurations are
the paper's Table 3 (pipeline depth, interleaving, global and micro batch), as Calculon's
validation/*.json (calculon-ai/calculon) restates them. The models are
tests/data/megatron/megatron_gpt.hpf.

Everything the price reads is a device fact (devices/a100.hpf) except one named
parameter, the A100 matmul curve's scale kappa = 0.845, fitted on the four full-recompute
rows; the four sequence-parallel rows are the held-out check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpdsl.api import bind_model
from hpdsl.cost.estimate import estimate
from hpdsl.model.strategy import Strategy

SPEC = Path(__file__).resolve().parents[1] / "data" / "megatron" / "megatron_gpt.hpf"

# model, pp, vpp, global batch, micro batch, measured seconds (full recompute, sp + selective)
ROWS = (
    ("megatron_22b", 1, 1, 4, 4, 1.42, 1.10),
    ("megatron_175b", 8, 3, 64, 1, 18.13, 13.75),
    ("megatron_530b", 35, 3, 280, 1, 49.05, 37.83),
    ("megatron_1t", 64, 1, 512, 1, 94.42, 71.49),
)
CASES = [(row[:5], mode, row[5] if mode == "full" else row[6]) for row in ROWS for mode in ("full", "seqsel")]


def step_time(model: str, pp: int, vpp: int, batch: int, micro: int, mode: str) -> float:
    """Return the device-model step time of one of the paper's runs (fp16, no flash attention, A100)."""
    strategy = Strategy(tp=8, pp=pp, vpp=vpp, dp=1, micro_batch=micro, global_batch=batch, seq_len=2048,
                        recompute="full" if mode == "full" else "selective", sequence_parallel=mode == "seqsel",
                        flash_attention=False, compute_bytes=2, device="a100", mfu=0)
    return estimate(bind_model([SPEC], model), strategy).step_time_s


@pytest.fixture(scope="module")
def errors() -> dict[tuple[str, str], float]:
    """Return the relative error of every row."""
    return {(run[0], mode): step_time(*run, mode) / measured - 1 for run, mode, measured in CASES}


@pytest.mark.parametrize(("run", "mode", "measured"), CASES, ids=[f"{c[0][0]}-{c[1]}" for c in CASES])
def test_each_row_is_within_ten_percent(run: tuple, mode: str, measured: float,
                                        errors: dict[tuple[str, str], float]) -> None:
    assert abs(errors[(run[0], mode)]) <= 0.10, f"{run[0]} {mode}: {errors[(run[0], mode)]:+.1%}"


def test_the_mean_error_is_within_five_percent(errors: dict[tuple[str, str], float]) -> None:
    assert sum(abs(e) for e in errors.values()) / len(errors) <= 0.05


def test_the_held_out_rows_are_within_ten_percent(errors: dict[tuple[str, str], float]) -> None:
    held_out = [e for (_, mode), e in errors.items() if mode == "seqsel"]
    assert max(abs(e) for e in held_out) <= 0.10

