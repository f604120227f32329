"""`hpdsl estimate` and `hpdsl search` through the real CLI: a flag hpdsl cannot price exits 2 with every reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MODEL = str(Path(__file__).resolve().parents[2] / "examples" / "llama3_8b.hpf")
HUGE = "9" * 20  # past 2^63-1


def hpdsl(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `hpdsl ARGS` in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], capture_output=True, text=True,
                          check=False, env=dict(os.environ), timeout=120)


@pytest.mark.parametrize(("args", "reasons"), [
    (("estimate", "--tp", HUGE, "--pp", "0", "--mfu", "inf"),
     (f"--tp {HUGE} is past 2^63-1", "--mfu inf is not a finite number", "pp must be at least 1, got 0")),
    (("estimate", "--devices", HUGE, "--recompute-layers", HUGE, "--softmax-bytes", "0"),
     (f"--devices {HUGE} is past 2^63-1", f"--recompute-layers {HUGE} is past 2^63-1",
      "softmax_bytes must be at least 1, got 0")),
    (("estimate", "--pp", "2", "--pp-split", f"{HUGE},1"), (f"--pp-split takes whole numbers up to 2^63-1",)),
    (("estimate", "--seq-len", "1e30"), ("'1e30' is not a valid integer",)),
    (("estimate", "--seq-len", "-5", "--tp", "0"),
     ("seq_len must be at least 1, got -5", "tp must be at least 1, got 0")),
    (("search", "--devices", "8", "--memory-gib", "inf"), ("--memory-gib inf: memory per device must be a finite size",)),
    (("search", "--devices", "8", "--memory-gib", "nan", "--top", "0"),
     ("--memory-gib nan: memory per device must be a finite size", "top must be at least 1, got 0")),
    (("search", "--devices", "8", "--memory-gib", "1e308"), ("--memory-gib 1e+308: memory per device must be a finite size",)),
    (("search", "--devices", "8", "--memory-gib", "-1"), ("memory per device must be a positive finite size",)),
    (("search", "--devices", HUGE, "--seq-len", "-1"),
     (f"--devices {HUGE} is past 2^63-1", "seq-len must be at least 1, got -1")),
    (("search", "--devices", str(2**63 - 1)), ("devices must be at most 2^24",)),
    (("search", "--devices", "0", "--global-batch", "0"),
     ("devices must be at least 1, got 0", "global batch must be at least 1, got 0")),
    (("search", "--devices", "8", "--micro-batches", HUGE), ("--micro-batches takes whole numbers up to 2^63-1",)),
    (("search", "--devices", "8", "--seq-len", "1e30"), ("'1e30' is not a valid integer",)),
    # In range for 64 bits, but past what prices exactly (hpdsl/cost/facts/bounds.py): refused, never wrapped.
    (("estimate", "--seq-len", str(2**63 - 1)), ("seq_len must be at most 2^30, got 9,223,372,036,854,775,807",)),
    (("estimate", "--micro-batch", str(2**62), "--global-batch", str(2**63 - 1)),
     ("micro_batch must be at most 2^24", "global_batch must be at most 2^40")),
    (("estimate", "--dp", str(2**62), "--micro-batch", "4"), ("dp must be at most 2^20",)),
    (("estimate", "--dp", str(2**20), "--tp", str(2**20)), ("dp·tp·pp·cp = 1,099,511,627,776 devices, more than 2^24",)),
    (("estimate", "--pp", str(2**44), "--vpp", str(2**47)), ("pp must be at most 2^20", "vpp must be at most 2^20")),
    (("estimate", "--devices", str(2**62)), ("num_devices must be at most 2^24",)),
    (("estimate", "--global-batch", str(-2**63), "--devices", "-1"),
     ("global_batch must be at least 1", "num_devices must be at least 1, got -1")),
    (("estimate", "--softmax-bytes", str(2**40)), ("softmax_bytes must be at most 64",)),
    (("search", "--devices", "64", "--top", str(2**62)), ("top must be at most 200",)),
    (("search", "--devices", "64", "--seq-len", str(2**40), "--global-batch", str(2**50)),
     ("seq-len must be at most 2^30", "global batch must be at most 2^40")),
    (("search", "--devices", "64", "--micro-batches", ",".join(map(str, range(1, 40)))),
     ("micro-batches lists 39 values, more than 16",)),
    (("search", "--devices", "64", "--vpp", str(2**62)), ("vpp must be at most 2^20",)),
    # Model fields overridden past their bounds (hpdsl/model/fields.py), as a .hpf literal would be.
    (("estimate", "--set", f"layers={10**9}"), ("layers must be at most 1,048,576",)),
    (("estimate", "--set", f"hidden={2**40}"), ("hidden must be at most 2,147,483,648",)),
])
def test_an_unpriceable_flag_exits_2_with_every_reason(args: tuple[str, ...], reasons: tuple[str, ...]) -> None:
    run = hpdsl(args[0], MODEL, *args[1:])
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr + run.stdout and "internal error" not in run.stderr
    for reason in reasons:
        assert reason in run.stderr, (reason, run.stderr)
