"""`hpdsl stack`, `hpdsl estimate` and `hpdsl import-hf` through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def hpdsl(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_stack_of_deepseek_v3_is_dense_3_moe_58_mtp_1() -> None:
    run = hpdsl("stack", "examples/deepseek_v3.hpf", "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert (data["model"], data["profile"]) == ("deepseek_v3", "deepseek")
    assert data["groups"] == [{"kind": "dense", "count": 3, "mtp": False},
                              {"kind": "moe", "count": 58, "mtp": False},
                              {"kind": "moe", "count": 1, "mtp": True}]
    assert data["kinds"]["dense"]["fields"]["experts"] == 1
    assert data["kinds"]["moe"]["fields"]["ffn_width"] == 2048
    text = hpdsl("stack", "examples/deepseek_v3.hpf").stdout
    assert "layers 61" in text and "MTP" in text


def test_stack_needs_a_model_choice_when_several_are_in_scope() -> None:
    run = hpdsl("stack", "examples")
    assert run.returncode == 2 and "--model" in run.stderr
    run = hpdsl("stack", "examples", "--model", "deepseek_v")
    assert run.returncode == 2 and "did you mean 'deepseek_v3'" in run.stderr
    assert hpdsl("stack", "examples", "--model", "t5_small").returncode == 0


def test_stack_of_a_broken_spec_shows_located_diagnostics(tmp_path: Path) -> None:
    (tmp_path / "bad.hpf").write_text("model m : llama2 {\n  hidden 64 layers 2 heads 3 kv_heads 2 vocab 9\n}\n")
    run = hpdsl("stack", "bad.hpf", cwd=tmp_path)
    assert run.returncode == 1
    assert "bad.hpf:2:" in run.stderr and "error[heads-not-divisible]" in run.stderr
    assert "Traceback" not in run.stderr


def test_estimate_reports_exact_parameters_and_active() -> None:
    data = json.loads(hpdsl("estimate", "examples/mixtral_8x7b.hpf", "--json").stdout)
    assert data["params"]["total"] == 46_702_792_704
    assert data["params"]["active"] == 12_879_925_248
    assert data["params"]["mtp"] == 0


def test_import_hf_errors_name_the_field(tmp_path: Path) -> None:
    # Qwen3-Next-80B-A3B's published config.json (tests/importers/configs/) with one key of its linear
    # block removed: deliberately malformed input.
    published = ROOT / "tests" / "importers" / "configs" / "qwen3_next_80b_a3b_thinking.json"
    config = json.loads(published.read_text(encoding="utf-8"))
    del config["linear_key_head_dim"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    run = hpdsl("import-hf", "config.json", cwd=tmp_path)
    assert run.returncode == 1
    assert "linear_key_head_dim" in run.stderr and "Traceback" not in run.stderr
    assert hpdsl("import-hf", "missing.json", cwd=tmp_path).returncode == 2
