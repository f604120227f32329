"""What the `hpdsl train` tests share: the CLI in-process, the scaled Mixtral, and the checks of a run's JSON
against one process and the estimate (docs/validation.md, "Training runs")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpdsl.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
MIXTRAL = str(ROOT / "examples" / "mixtral_8x7b.hpf")
MIXTRAL_SMALL = [f"--set={pair}" for pair in ("layers=2", "hidden=64", "heads=4", "kv_heads=2", "vocab=128",
                                              "ffn_width=96", "experts=4", "expert_width=32")]
"""A two-layer Mixtral: 90,944 parameters."""
QWEN3_NEXT = str(ROOT / "examples" / "qwen3_next_80b_a3b.hpf")
QWEN3_NEXT_SMALL = [f"--set={pair}" for pair in (
    "layers=4", "hidden=64", "heads=4", "kv_heads=2", "head_dim=16", "vocab=128", "ffn_width=96", "experts=4",
    "top_k=2", "expert_width=32", "shared_width=32", "key_heads=2", "key_head_dim=16", "value_heads=4",
    "value_head_dim=16", "mtp=0")]
"""A four-layer Qwen3-Next (Gated DeltaNet and full attention), without its MTP layer."""
DEEPSEEK_V3 = str(ROOT / "examples" / "deepseek_v3.hpf")
DEEPSEEK_V3_SMALL = [f"--set={pair}" for pair in (
    "layers=4", "hidden=64", "heads=4", "kv_heads=4", "vocab=128", "ffn_width=96", "first_k_dense=1", "experts=4",
    "top_k=2", "expert_width=32", "q_lora_rank=32", "kv_lora_rank=16", "rope_dim=8", "nope_dim=16",
    "v_head_dim=16", "router_groups=2", "router_group_top=1")]
"""Scaled DeepSeek-V3 with its MTP layer (`mtp 1`): trained with the MTP loss (hpdsl/torch/objective.py), its
router as published (sigmoid scores, the score correction, group-limited: here 2 of 2 experts from 1 of 2 groups)."""

STATIC = ("params_bytes", "grads_bytes", "optimizer_bytes")


def hpdsl(*args: str) -> tuple[int, str]:
    """Run the CLI in-process; return its exit code and output (stdout alone under --json: stderr has train's
    live line of every step)."""
    run = CliRunner().invoke(main, list(args), prog_name="hpdsl")
    return run.exit_code, run.stdout if "--json" in args and run.exit_code == 0 else run.output


def train_json(*args: str, validate: bool = True) -> dict:
    """Run `hpdsl train ARGS --json` (with `--validate`: the one-process checks); return its result (it must succeed)."""
    run = CliRunner().invoke(main, ["train", *args, *(("--validate",) if validate else ()), "--json"],
                             prog_name="hpdsl")
    assert run.exit_code == 0, run.output
    return dict(json.loads(run.stdout))  # stderr has the live line of every step


def gradients_match(result: dict) -> None:
    """Assert step 0's gradients, gathered whole on each rank, equal the unsharded model's on the whole batch."""
    for rank in result["ranks"]:
        measured = rank["measured"]
        assert measured["grad_max_diff"] <= 1e-5 * measured["grad_max_abs"], rank["rank"]


def activations_match(result: dict, rel: float) -> None:
    """Assert every rank's measured activation peak is the estimate's to `rel`."""
    for rank in result["ranks"]:
        measured, estimated = (rank[w]["activation_peak_bytes"] for w in ("measured", "estimated"))
        assert estimated == pytest.approx(measured, rel=rel), rank["rank"]


def matches_one_process(result: dict) -> None:
    """Assert the losses and step 0's gradients equal the unsharded model's."""
    assert result["loss"] == pytest.approx(result["reference_loss"], rel=1e-5, abs=1e-5)
    gradients_match(result)


def clipped_norms_match(result: dict, clip: float) -> None:
    """Assert the run's global gradient norms are one process's (step 0 to 1e-6, later to 1e-5) and clipping bit."""
    norms, reference = result["grad_norm"], result["reference_grad_norm"]
    assert norms[0] == pytest.approx(reference[0], rel=1e-6)
    assert norms == pytest.approx(reference, rel=1e-5)
    assert norms[0] > clip  # the norm is the one before clipping, as torch reports it: the clip scaled step 0


def static_bytes_equal(result: dict, parts: tuple[str, ...] = STATIC) -> None:
    """Assert every rank holds exactly the parameter, gradient and optimizer bytes the estimator prices."""
    for rank in result["ranks"]:
        for part in parts:
            assert rank["measured"][part] == rank["estimated"][part], (rank["rank"], part)


def activations_within_ten_percent(result: dict) -> None:
    """Assert each rank's saved-activation peak (parameters left out) is within 10% of the estimate."""
    for rank in result["ranks"]:
        measured, estimated = rank["measured"]["activation_peak_bytes"], rank["estimated"]["activation_peak_bytes"]
        assert measured == pytest.approx(estimated, rel=0.10), (rank["rank"], measured, estimated)


def matches_one_process_and_the_estimate(result: dict) -> None:
    """Assert all three: one process's losses and gradients, exact static bytes, activations within 10%."""
    matches_one_process(result)
    static_bytes_equal(result)
    activations_within_ten_percent(result)
