"""Gradient accumulation without pp in `hpdsl train`: micro-batches summed into one step, reduced per micro-batch
or once (deferred_grad_accumulation), against one process on the whole batch and against the estimate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpdsl.cli.train import runnable_reasons
from hpdsl.cost.facts.backend import backend_facts
from hpdsl.ir.nodes import RunFacts
from hpdsl.model.strategy import Strategy
from train_batch import shared, train_batch
from train_support import MIXTRAL_SMALL as SMALL
from train_support import gradients_match

ROOT = Path(__file__).resolve().parents[2]
MIXTRAL = ROOT / "examples" / "mixtral_8x7b.hpf"
ACCUMULATING = Strategy(dp=2, global_batch=4, zero="os+grad+params", precision="fp32", seq_len=32)



def test_train_runs_accumulation_and_prices_it_as_the_profile_says() -> None:
    assert ACCUMULATING.micro_batches == 2 and runnable_reasons(ACCUMULATING) == []
    assert not backend_facts(RunFacts(), ACCUMULATING).deferred_grad_accumulation
    assert backend_facts(RunFacts(deferred_grad_accumulation=True), ACCUMULATING).deferred_grad_accumulation


def deferred_mixtral(folder: Path) -> Path:
    """Write Mixtral with a copy of its profile that states deferred_grad_accumulation; return the file."""
    profile = (ROOT / "profiles" / "mixtral.hpf").read_text(encoding="utf-8")
    # The copy claims no HF model_type (mixtral.hpf does), so it carries no import rules either.
    profile = re.sub(r'  hf "mixtral" \{.*?\n  \}\n', "", profile.replace('  model_types "mixtral"\n', ""), flags=re.S)
    profile = profile.replace("profile mixtral {",
                              "profile mixtral_deferred {\n  run { deferred_grad_accumulation = true }")
    model = MIXTRAL.read_text(encoding="utf-8").replace("model mixtral_8x7b : mixtral {",
                                                        "model mixtral_deferred : mixtral_deferred {")
    path = folder / "mixtral_deferred.hpf"
    path.write_text(profile + "\n" + model, encoding="utf-8")
    return path


RUNS = {"dp2-reduce-each": (False, 1), "dp2-deferred": (True, 1), "dp2-ep2-deferred": (True, 2)}
"""Each run: whether the profile defers the reduction, and ep."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Return the result of every run of RUNS, by name, all in one 2-process launch (tests/torch/train_batch.py)."""
    def make() -> dict[str, dict]:
        deferred = deferred_mixtral(tmp_path_factory.mktemp("deferred"))
        return train_batch({name: [str(deferred if defer else MIXTRAL), *SMALL, "--dp", "2", "--ep", str(ep),
                                   "--zero", "os+grad+params", "--global-batch", "4", "--nproc", "2", "--steps", "3"]
                            for name, (defer, ep) in RUNS.items()})

    return shared("accumulation-2", tmp_path_factory, make)


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", list(RUNS))
def test_two_micro_batches_match_one_process_on_the_whole_batch_and_the_estimate(
        runs: dict[str, dict], name: str) -> None:
    deferred = RUNS[name][0]
    result = runs[name]
    assert result["loss"] == pytest.approx(result["reference_loss"], rel=1e-5, abs=1e-5)
    gradients_match(result)  # summed over both micro-batches, against one process on the whole batch
    for rank in result["ranks"]:
        measured, estimated = rank["measured"], rank["estimated"]
        for part in ("params_bytes", "grads_bytes", "optimizer_bytes", "held_grads_bytes"):
            assert measured[part] == estimated[part], (rank["rank"], part)
        # Deferred, FSDP2 holds every gradient unsharded between the micro-batches (the estimator's
        # transient); otherwise the reduce-scattered shards alone.
        assert (measured["held_grads_bytes"] > measured["grads_bytes"]) is deferred
        # One micro-batch's saved activations at a time: nothing is held from one to the next.
        assert measured["activation_peak_bytes"] == pytest.approx(estimated["activation_peak_bytes"], rel=0.10)
