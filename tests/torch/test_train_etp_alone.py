"""etp without ep: every rank holds every expert at 1/etp of its width (the ep variant over a one-rank ep axis),
against one process and the estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpdsl.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
MIXTRAL = [str(ROOT / "examples" / "mixtral_8x7b.hpf"), *(f"--set={pair}" for pair in (
    "layers=2", "hidden=64", "heads=4", "kv_heads=2", "vocab=128", "ffn_width=96", "experts=4", "expert_width=32"))]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_dp2_etp2_without_ep_matches_one_process_and_the_estimate() -> None:
    run = CliRunner().invoke(main, ["train", *MIXTRAL, "--dp", "2", "--etp", "2", "--zero", "os+grad+params",
                                    "--nproc", "2", "--steps", "3", "--json"], prog_name="hpdsl")
    assert run.exit_code == 0, run.output
    result = json.loads(run.output)
    assert result["loss"] == pytest.approx(result["reference_loss"], rel=1e-5, abs=1e-5)
    assert [(r["coords"]["ep"], r["coords"]["etp"]) for r in result["ranks"]] == [(0, 0), (0, 1)]
    for rank in result["ranks"]:
        measured, estimated = rank["measured"], rank["estimated"]
        # All 4 experts at half their width on each rank; their ZeRO group dp·cp·tp/(ep·etp) is 1.
        for part in ("params_bytes", "grads_bytes", "optimizer_bytes"):
            assert measured[part] == estimated[part], (rank["rank"], part)
        assert measured["grad_max_diff"] <= 1e-5 * measured["grad_max_abs"], rank["rank"]
        assert measured["activation_peak_bytes"] == pytest.approx(estimated["activation_peak_bytes"], rel=0.10)
