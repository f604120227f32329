"""`hpdsl explain` through the real CLI: family, variant, clause, mesh and sources of a module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def hpdsl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=180)


def test_explain_names_the_variant_the_rule_and_where_they_are_declared() -> None:
    run = hpdsl("explain", "examples/deepseek_v3.hpf", "--path", "layers.5.ffn.experts", "--ep", "8",
                "--json")
    assert run.returncode == 0, run.stderr
    story = json.loads(run.stdout)
    assert (story["family"], story["variant"]) == ("grouped_experts", "ep")
    assert story["clause"] == "when (parallel or etp > 1) and not use_mxfp8"
    assert story["mesh"]["ep"] == 8 and story["parallel"] is True
    assert story["declared_at"]["variant"].startswith("<hpdsl>/families/grouped_experts.hpf:")


def test_explain_with_a_selector_and_a_request_the_rules_reject() -> None:
    run = hpdsl("explain", "examples/deepseek_v3.hpf", "--path", "layers.5.ffn.experts", "--ep", "2",
                "--set", "experts.use_mxfp8=true")
    assert run.returncode == 0, run.stderr
    assert "variant mxfp8" in run.stdout and "use_mxfp8=true" in run.stdout
    run = hpdsl("explain", "examples/deepseek_v3.hpf", "--path", "layers.5.ffn.experts", "--ep", "4",
                "--set", "experts.use_mxfp8=true")
    assert run.returncode == 1
    assert "MXFP8 experts support only EP=1 or EP=2" in run.stderr and "Traceback" not in run.stderr


def test_explain_of_a_container_lists_the_families_inside() -> None:
    run = hpdsl("explain", "examples/qwen3_next_80b_a3b.hpf", "--path", "layers.0")
    assert run.returncode == 0, run.stderr
    assert "layers.0.mixer" in run.stdout and "layers.0.ffn.experts" in run.stdout
    assert hpdsl("explain", "examples/qwen3_next_80b_a3b.hpf", "--path", "layers.99").returncode == 1
