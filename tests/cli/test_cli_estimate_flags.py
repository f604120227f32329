"""`hpdsl estimate --as-trained`: the strategy priced as `hpdsl train` runs it, through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MODEL = str(Path(__file__).resolve().parents[2] / "examples" / "llama3_8b.hpf")
PP2 = ("--pp", "2", "--global-batch", "4", "--json")
"""Two stages, four micro-batches: torch's backend sums each micro-batch's gradients after the first."""


def _estimate(*args: str) -> dict:
    run = subprocess.run([sys.executable, "-m", "hpdsl.cli", "estimate", MODEL, *args], capture_output=True,
                         text=True, check=False, env=dict(os.environ), timeout=120)
    assert run.returncode == 0, run.stderr
    return dict(json.loads(run.stdout))


def test_as_trained_prices_the_backends_gradient_sums_and_megatrons_default_does_not() -> None:
    # The backend's facts (hpdsl/cost/facts/backend.py as_trained): gradients summed every micro-batch after
    # the first (fused_grad_accumulation false), deferred under pp, what it keeps per parameter.
    plain, trained = _estimate(*PP2), _estimate(*PP2, "--as-trained", "cpu")
    assert "grad_sum_s" not in plain["time_breakdown"]
    assert trained["time_breakdown"]["grad_sum_s"] > 0
    assert trained["step_time_s"] > plain["step_time_s"]


def test_as_trained_names_its_devices() -> None:
    run = subprocess.run([sys.executable, "-m", "hpdsl.cli", "estimate", MODEL, "--as-trained", "tpu"],
                         capture_output=True, text=True, check=False, env=dict(os.environ), timeout=120)
    assert run.returncode == 2 and "'cpu', 'cuda'" in run.stderr and "Traceback" not in run.stderr
