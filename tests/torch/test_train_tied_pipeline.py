"""A head tied to the embedding under pp: the last stage multiplies by its own copy of the table, whose gradient
is summed with the first stage's (hpdsl/torch/pipeline.py `sum_embedding_grads`), against one process and the estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpdsl.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
LLAMA_TIED = [str(ROOT / "examples" / "llama2_7b.hpf"), *(f"--set={pair}" for pair in (
    "layers=2", "hidden=64", "heads=4", "kv_heads=2", "vocab=128", "ffn_width=96", "tie_embeddings=true"))]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_tied_head_under_tp2_pp2_matches_one_process_and_the_estimate() -> None:
    run = CliRunner().invoke(main, ["train", *LLAMA_TIED, "--pp", "2", "--tp", "2", "--sp", "--global-batch", "2",
                                    "--nproc", "4", "--steps", "3", "--json"], prog_name="hpdsl")
    assert run.exit_code == 0, run.output
    result = json.loads(run.output)
    assert result["loss"] == pytest.approx(result["reference_loss"], rel=1e-5, abs=1e-5)
    assert {(r["coords"]["pp"], r["coords"]["tp"]) for r in result["ranks"]} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    for rank in result["ranks"]:
        measured, estimated = rank["measured"], rank["estimated"]
        # The last stage holds its vocabulary-split copy of the table, priced as an untied head's.
        for part in ("params_bytes", "grads_bytes", "optimizer_bytes"):
            assert measured[part] == estimated[part], (rank["rank"], part)
        # The copy's gradient, summed with the first stage's, is the whole table's (lookups and head).
        assert measured["grad_max_diff"] <= 1e-5 * measured["grad_max_abs"], rank["rank"]
        assert measured["activation_peak_bytes"] == pytest.approx(estimated["activation_peak_bytes"], rel=0.10)
