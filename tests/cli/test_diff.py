"""`hpdsl diff A B`: per model, what changed between two specs or registries, exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hpdsl.api import bind_model
from hpdsl.cost import parameters

REPO = Path(__file__).resolve().parents[2]
LLAMA = REPO / "examples/llama3_8b.hpf"


def hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `hpdsl ARGS` in a fresh interpreter, in `cwd`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "hpdsl", *args], cwd=cwd, capture_output=True,
                          text=True, check=False, env=env)


def shorter(tmp_path: Path) -> Path:
    text = LLAMA.read_text()
    assert "layers 32 " in text
    path = tmp_path / "llama3_8b_30.hpf"
    path.write_text(text.replace("layers 32 ", "layers 30 ", 1))
    return path


def test_layers_change_reports_exact_parameter_difference(tmp_path: Path) -> None:
    other = shorter(tmp_path)
    run = hpdsl("diff", str(LLAMA), str(other), "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    model = json.loads(run.stdout)["models"]["llama3_8b"]
    old, new = parameters(bind_model([LLAMA])), parameters(bind_model([other]))
    per_layer = next(g.per_layer for g in old.groups)
    assert model["delta"]["total"] == new.total - old.total == -2 * per_layer
    assert model["delta"]["active"] == new.active - old.active
    assert model["a"]["params"]["total"] == old.total
    assert model["b"]["groups"] == [{"kind": "decoder", "count": 30, "mtp": False}]
    assert model["a"]["peak_memory_per_stage"] is None
    assert model["b"]["flops_per_token"] < model["a"]["flops_per_token"]


def test_text_and_strategy_give_stage_peaks(tmp_path: Path) -> None:
    other = shorter(tmp_path)
    run = hpdsl("diff", str(LLAMA), str(other), "--pp", "2", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "layers       32 -> 30" in run.stdout
    assert "-436,224,000" in run.stdout
    assert "stage 0" in run.stdout and "stage 1" in run.stdout
    data = json.loads(hpdsl("diff", str(LLAMA), str(other), "--pp", "2", "--json",
                            cwd=tmp_path).stdout)
    assert len(data["models"]["llama3_8b"]["b"]["peak_memory_per_stage"]) == 2


def test_registry_against_spec_is_unchanged_and_models_added(tmp_path: Path) -> None:
    registry = tmp_path / "registry.json"
    assert hpdsl("compile", str(LLAMA), "-o", str(registry), cwd=tmp_path).returncode == 0
    run = hpdsl("diff", str(registry), str(LLAMA), "--json", cwd=tmp_path)
    data = json.loads(run.stdout)
    assert data["models"]["llama3_8b"]["changed"] is False
    both = tmp_path / "both"
    both.mkdir()
    (both / "a.hpf").write_text(LLAMA.read_text())
    (both / "b.hpf").write_text((REPO / "examples/mixtral_8x7b.hpf").read_text())
    data = json.loads(hpdsl("diff", str(LLAMA), str(both), "--json", cwd=tmp_path).stdout)
    assert data["added"] == ["mixtral_8x7b"] and data["removed"] == []


def test_unknown_model_is_a_usage_error(tmp_path: Path) -> None:
    run = hpdsl("diff", str(LLAMA), str(LLAMA), "--model", "nope", cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
