"""The device time model as the default, `--mfu X` as the override, and each term it prices (issue 22)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpdsl.api import bind_model
from hpdsl.cost.estimate import estimate
from hpdsl.model.strategy import Strategy

ROOT = Path(__file__).resolve().parents[2]
LLAMA = ROOT / "examples" / "llama3_8b.hpf"


@pytest.fixture(scope="module")
def llama() -> object:
    """Return Llama-3-8B bound to its profile."""
    return bind_model([LLAMA], "llama3_8b")


def _hpdsl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False, env=dict(os.environ))


def test_the_library_prices_with_the_device_by_default(llama: object) -> None:
    strategy = Strategy(tp=2, dp=4, global_batch=32)
    default = estimate(llama, strategy)  # type: ignore[arg-type]
    assert strategy.mfu == 0.0
    assert default.step_time_s == estimate(llama, strategy.with_(mfu=0.0)).step_time_s  # type: ignore[arg-type]
    assert default.step_time_s != estimate(llama, strategy.with_(mfu=0.4)).step_time_s  # type: ignore[arg-type]
    assert default.to_json()["machine"]["time_model"] == "device"


def test_an_explicit_mfu_keeps_the_constant_efficiency_model(llama: object) -> None:
    strategy = Strategy(tp=2, dp=4, global_batch=32, mfu=0.4)
    priced = estimate(llama, strategy)  # type: ignore[arg-type]
    # Every executed FLOP of the busiest device at 0.4 of the H100's 989 TFLOP/s bounds the step from below.
    assert priced.step_time_s >= priced.flops.per_device / (0.4 * 9.89e14)
    machine = priced.to_json()["machine"]
    assert machine["time_model"] == "mfu" and machine["assumed_mfu"] == 0.4


def test_the_cli_says_which_time_model_it_assumed() -> None:
    flags = ("estimate", str(LLAMA), "--tp", "2", "--dp", "4", "--global-batch", "32")
    default, override = _hpdsl(*flags, "--json"), _hpdsl(*flags, "--mfu", "0.4", "--json")
    assert default.returncode == 0 and override.returncode == 0, default.stderr + override.stderr
    first, second = json.loads(default.stdout), json.loads(override.stdout)
    assert first["machine"]["time_model"] == "device" and first["machine"]["assumed_mfu"] is None
    assert second["machine"]["time_model"] == "mfu" and second["step_time_s"] != first["step_time_s"]
    text = _hpdsl(*flags).stdout
    assert "the device time model" in text and "where the step goes" in text
