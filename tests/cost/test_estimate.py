"""The Estimate: its JSON, its agreement with grid pricing, step time, and the CLI bodies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cost_builders import ROOT, dense_model, example, moe_model

from hpdsl.cli.report import render_estimate, strategy_from_flags
from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.facts.params import parameters
from hpdsl.cost.feasibility.problems import InvalidStrategyError
from hpdsl.cost.price.grid import price_grid
from hpdsl.model.strategy import Strategy

DEEPSEEK = Strategy(tp=8, pp=8, dp=2, ep=8, sequence_parallel=True, global_batch=256)


def test_json_has_the_fields_the_issue_names() -> None:
    result = estimate(example("deepseek_v3"), DEEPSEEK)
    data = json.loads(json.dumps(result.to_json()))
    assert {"params", "flops", "memory", "communication", "step_time_s"} <= set(data)
    assert len(data["memory"]["per_stage"]) == 8
    assert data["memory"]["peak_bytes"] == max(s["total_bytes"] for s in data["memory"]["per_stage"])
    assert data["params"]["total"] == parameters(example("deepseek_v3")).total
    assert set(data["communication"]) == {"tp", "cp", "ep", "pp", "dp"}
    assert data["communication"]["tp"] > 0 and data["communication"]["ep"] > 0
    assert data["step_time_s"] > 0 and data["flops"]["total"] > 0


def test_estimate_equals_its_row_of_a_grid() -> None:
    cost_model = moe_model()
    strategies = [Strategy(dp=4, ep=e, pp=p, micro_batch=m, recompute=r, zero=z, global_batch=16)
                  for e in (1, 4) for p in (1, 2) for m in (1, 2) for r in ("none", "full")
                  for z in ("none", "os+grad+params")]
    strategies.append(Strategy(dp=4, pp=2, recompute="full", recompute_layers=1, global_batch=16))
    strategies.append(Strategy(dp=2, pp=2, vpp=2, global_batch=16, pp_split=(1, 1, 1, 1)))
    price = price_grid(cost_model, StrategyGrid.from_strategies(strategies))
    for i, strategy in enumerate(strategies):
        one = estimate(cost_model, strategy)
        assert one.memory.peak_bytes == price.peak_bytes[i]
        assert one.step_time_s == price.step_time_s[i]
        assert one.flops.forward == price.flops_forward[i]
        assert one.flops.recompute == price.flops_recompute[i]


def test_invalid_strategies_are_refused_with_reasons() -> None:
    with pytest.raises(InvalidStrategyError, match="tp 3 does not divide"):
        estimate(dense_model(), Strategy(tp=3))


def test_step_time_has_a_pipeline_bubble() -> None:
    cost_model = dense_model(layers=8)
    one = estimate(cost_model, Strategy(pp=1, global_batch=8)).step_time_s
    four = estimate(cost_model, Strategy(pp=4, global_batch=8))
    per_stage = max(s.micro_batch_time_s for s in four.memory.per_stage)
    assert four.step_time_s >= 8 * per_stage  # m + p - 1 slots of the slowest stage, at least m
    assert four.step_time_s > one / 4  # four stages do not give four times the speed


def test_interleaving_shrinks_the_bubble() -> None:
    cost_model = dense_model(layers=8)
    plain = estimate(cost_model, Strategy(pp=4, global_batch=8)).step_time_s
    interleaved = estimate(cost_model, Strategy(pp=4, vpp=2, global_batch=8)).step_time_s
    assert interleaved < plain


def test_render_shows_every_stage() -> None:
    text = render_estimate(estimate(example("deepseek_v3"), DEEPSEEK))
    assert "deepseek_v3 on 128 x h100" in text
    assert text.count("moe 8") == 5 and "mtp:moe 1" in text and "peak" in text


def hpdsl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=120)


def test_estimate_command_text_json_and_plot(tmp_path: Path) -> None:
    spec = "examples/llama2_7b.hpf"
    run = hpdsl("estimate", spec, "--tp", "2", "--dp", "4", "--global-batch", "32")
    assert run.returncode == 0 and "llama2_7b" in run.stdout and "parameters of llama2_7b" in run.stdout
    plot = tmp_path / "memory.png"
    run = hpdsl("estimate", spec, "--pp", "2", "--json", "--plot", str(plot))
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["memory"]["per_stage"][1]["stage"] == 1 and data["params"]["total"] == 6_738_415_616
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_estimate_command_errors() -> None:
    spec = "examples/llama2_7b.hpf"
    run = hpdsl("estimate", spec, "--tp", "3", "--json")
    assert run.returncode == 2 and "tp 3 does not divide" in json.loads(run.stdout)["error"]["message"]
    run = hpdsl("estimate", spec, "--model", "llama3")
    assert run.returncode == 2 and "no model 'llama3'" in run.stderr
    assert hpdsl("estimate", "examples/missing.hpf").returncode == 2
    assert hpdsl("estimate", "examples").returncode == 2  # several models: --model is needed
    assert hpdsl("estimate", spec, "--device", "tpu9").returncode == 2


def test_estimate_command_reports_spec_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.hpf"
    bad.write_text("model m : nosuchprofile { hidden 8 layers 1 heads 1 vocab 8 }\n")
    run = hpdsl("estimate", "bad.hpf", cwd=tmp_path)
    assert run.returncode == 1 and "bad.hpf:1:11: error[unknown-profile]" in run.stderr
    assert "^~~~" in run.stderr and "Traceback" not in run.stderr


def test_flags_parse_the_split() -> None:
    assert strategy_from_flags({"pp": 2, "pp_split": "1, 3", "tp": None}) == Strategy(pp=2, pp_split=(1, 3))


def test_llama2_fits_one_h100_only_with_sharding() -> None:
    cost_model = example("llama2_7b")
    alone = estimate(cost_model, Strategy(seq_len=4096))
    assert not alone.memory.fits
    sharded = estimate(cost_model, Strategy(dp=8, zero="os+grad+params", recompute="full",
                                            global_batch=8))
    assert sharded.memory.fits
    assert np.isclose(sharded.tokens_per_s * sharded.step_time_s, 8 * 4096)
