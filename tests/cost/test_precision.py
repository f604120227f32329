"""Static memory per parameter from the precision and the optimizer, stated in every estimate."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cost_builders import ROOT, dense_model, example

from hpdsl.cost import parameters
from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.precision import OPTIMIZERS, PRECISIONS
from hpdsl.cost.feasibility.problems import InvalidStrategyError
from hpdsl.ir.nodes import RunFacts
from hpdsl.model.strategy import Strategy

# bytes per parameter before ZeRO: weights + gradients + master + fp8 copy + states·width
EXPECTED = {
    ("bf16-mixed", "adam"): 2 + 4 + 4 + 0 + 8,   # Megatron's "bf16 param, fp32 grads" row: 18
    ("bf16-mixed", "sgd-momentum"): 2 + 4 + 4 + 4,
    ("bf16-mixed", "adafactor"): 2 + 4 + 4,
    ("fp8-mixed", "adam"): 2 + 4 + 4 + 1 + 8,
    ("fp32", "adam"): 4 + 4 + 0 + 8,
    ("fp32", "sgd-momentum"): 4 + 4 + 4,
}


def _static_per_param(cost_model, **kw) -> float:
    stage = estimate(cost_model, Strategy(**kw)).memory.per_stage[0]
    total = parameters(cost_model).total
    return (stage.params_bytes + stage.grads_bytes + stage.optimizer_bytes) / total


@pytest.mark.parametrize(("precision", "optimizer"), list(EXPECTED))
def test_precision_and_optimizer_set_the_bytes_per_parameter(precision: str, optimizer: str) -> None:
    cost_model = dense_model()
    assert _static_per_param(cost_model, precision=precision, optimizer=optimizer) == \
        EXPECTED[precision, optimizer]
    result = estimate(cost_model, Strategy(precision=precision, optimizer=optimizer))
    assert result.assumptions()["static_bytes_per_param"] == EXPECTED[precision, optimizer]


def test_the_default_is_bf16_mixed_adam_with_fp32_master_weights() -> None:
    assert list(PRECISIONS)[0] == "bf16-mixed" and list(OPTIMIZERS)[0] == "adam"
    assert _static_per_param(dense_model()) == 18


def test_a_profile_stated_fact_wins_over_the_precision() -> None:
    assert _static_per_param(dense_model(run=RunFacts(grad_bytes=2))) == 16


def test_fp32_saves_activations_in_fp32() -> None:
    cost_model = dense_model()
    bf16 = estimate(cost_model, Strategy()).memory.per_stage[0].activation_bytes
    fp32 = estimate(cost_model, Strategy(precision="fp32")).memory.per_stage[0].activation_bytes
    assert fp32 > 1.5 * bf16


def test_unknown_names_are_reasons() -> None:
    with pytest.raises(InvalidStrategyError) as error:
        estimate(dense_model(), Strategy(precision="fp16", optimizer="lion"))
    assert len(error.value.reasons) == 2


def test_zero_shards_the_whole_optimizer_state() -> None:
    cost_model = dense_model()
    total = parameters(cost_model).total
    stage = estimate(cost_model, Strategy(dp=8, zero="os")).memory.per_stage[0]
    assert stage.optimizer_bytes == pytest.approx((4 + 8) * total / 8)


def _json(*args: str) -> dict:
    run = subprocess.run([sys.executable, "-m", "hpdsl.cli", "estimate", "examples/llama2_7b.hpf", "--json",
                          *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_llama2_7b_at_dp8_without_zero_holds_at_least_16_bytes_per_parameter() -> None:
    """The issue's case: 6.74 B parameters used to "fit" in 77 GiB; 18 B each do not."""
    out = _json("--dp", "8", "--zero", "none")
    stage = out["memory"]["per_stage"][0]
    static = stage["params_bytes"] + stage["grads_bytes"] + stage["optimizer_bytes"]
    assert static / out["params"]["total"] >= 16
    assert out["assumed"]["static_bytes_per_param"] == 18
    assert out["assumed"]["precision"] == "bf16-mixed" and out["assumed"]["optimizer"] == "adam"
    assert not out["memory"]["fits"]
    assert out["strategy"]["sequence_parallel"] is False
    sgd = _json("--dp", "8", "--precision", "fp32", "--optimizer", "sgd-momentum")
    assert sgd["assumed"]["static_bytes_per_param"] == 12


def test_example_estimates_say_what_they_assumed() -> None:
    run = subprocess.run([sys.executable, "-m", "hpdsl.cli", "estimate", "examples/llama3_8b.hpf", "--tp", "2"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "assumed bf16-mixed, adam: 2 weights + 4 gradients + 4 master + 2x4 optimizer states = 18 B" \
        in run.stdout
    assert ", sp, " in run.stdout or ", no sp, " in run.stdout


def test_llama_example_binds() -> None:
    assert example("llama2_7b").profile.run.grad_bytes is None  # follows --precision


def test_softmax_bytes_is_a_flag_and_counts_without_flash() -> None:
    def activations(*flags: str) -> float:
        run = subprocess.run([sys.executable, "-m", "hpdsl.cli", "estimate", "examples/llama2_7b.hpf", "--json",
                              "--seq-len", "1024", *flags], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)["memory"]["per_stage"][0]["activation_bytes"]

    assert activations("--no-flash", "--softmax-bytes", "4") > activations("--no-flash")
    assert activations("--softmax-bytes", "4") == activations()  # flash keeps no softmax output
