"""examples/train_step.py runs: small Qwen3-Next- and DeepSeek-V3-shaped models train a step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train_step.py"


def test_the_train_step_example_runs() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--steps", "1", "--full-size"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "== qwen3_next_small" in out and "== deepseek_v3_small" in out
    assert "family gated_delta_net -> variant chunked" in out
    assert out.count("equal: True") == 2
