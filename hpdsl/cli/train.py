"""`hpdsl train`: run a strategy for K steps on N CPU processes (gloo) and set what it measures beside the estimate.

The command prices the strategy first (the estimator, in this process), then
launches `torch.distributed.run` with hpdsl/torch/train.py as the worker and
reads back each rank's JSON. Training is fp32 on synthetic tokens, so the
precision defaults to fp32 (AdamW) and the sequence to 32 tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import click

from hpdsl.cli.app import emit_json, json_option
from hpdsl.cli.options import ESTIMATE_FLAGS, flag_options, model_option, no_stdlib_option, set_option, spec_paths
from hpdsl.errors import BuildError, InputError

_FP32 = {"precision": "fp32", "seq_len": 32}
_PARTS = ("params_bytes", "grads_bytes", "optimizer_bytes", "activation_peak_bytes")


@click.command("train")
@spec_paths
@model_option
@no_stdlib_option
@flag_options(ESTIMATE_FLAGS)
@set_option
@click.option("--nproc", type=int, required=True, help="processes to launch (dp·tp·cp of the strategy)")
@click.option("--steps", type=int, default=3, show_default=True, help="training steps")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the weights and the tokens")
@click.option("--timeout", "timeout_s", type=int, default=600, show_default=True, help="seconds before giving up")
@json_option
def train_command(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                  nproc: int, steps: int, seed: int, timeout_s: int, as_json: bool, **flags: Any) -> None:
    """Train a strategy K steps on N CPU processes; print the losses and measured bytes beside the estimate.

    \b
    Examples:
      hpdsl train examples/mixtral_8x7b.hpf --dp 4 --ep 2 --zero os+grad+params --nproc 4 \\
          --set layers=2 --set hidden=64 --set heads=4 --set kv_heads=2 --set vocab=128 --set experts=4 --set expert_width=32
      hpdsl train examples/mixtral_8x7b.hpf --pp 2 --vpp 2 --tp 2 --sp --nproc 4 \\
          --set layers=4 --set hidden=64 --set heads=4 --set kv_heads=2 --set vocab=128 --set experts=4 --set expert_width=32
    """
    from hpdsl.cli.report import strategy_from_flags

    strategy = strategy_from_flags({**_FP32, **{k: v for k, v in flags.items() if v is not None}})
    name, result = run_training(paths, model, no_stdlib, sets, strategy, nproc=nproc, steps=steps, seed=seed,
                                timeout_s=timeout_s)
    if as_json:
        emit_json(result)
    else:
        click.echo(render_train(name, strategy, result))


def run_training(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                 strategy: Any, *, nproc: int, steps: int = 3, seed: int = 0,
                 timeout_s: int = 600) -> tuple[str, dict[str, Any]]:
    """Price `strategy`, train it on `nproc` gloo processes; return the model's name and train's JSON result."""
    from hpdsl.cli.models import load_cost_model
    from hpdsl.cost.facts.backend import backend_facts
    from hpdsl.cost.estimate import estimate
    from hpdsl.ir.nodes import evolve
    from hpdsl.ir.overrides import parse_sets

    _check_runnable(strategy, nproc)
    parsed = parse_sets(sets)
    cost_model = load_cost_model(paths, model, stdlib=not no_stdlib, sets=sets)
    _check_stages(cost_model.model, strategy, cost_model.profile.run.shard_activations)
    # Priced as the backend runs it (hpdsl/cost/facts/backend.py): its gradients, loss, gathers, CPU kernels.
    run = backend_facts(cost_model.profile.run, strategy)
    priced = estimate(_with_run(cost_model, run), strategy)
    estimated = _stage_estimates(priced)
    if strategy.pp == 1 and strategy.micro_batches > 1:
        undeferred = estimate(_with_run(cost_model, evolve(run, deferred_grad_accumulation=False)), strategy)
        for stage, deferred, plain in zip(estimated, priced.memory.per_stage, undeferred.memory.per_stage):
            stage["held_grads_bytes"] = _held_grads(deferred, plain)
    config = {"paths": [str(p) for p in paths], "model": cost_model.model.name, "stdlib": not no_stdlib,
              "sets": parsed, "strategy": attrs.asdict(strategy), "steps": steps, "seed": seed}
    ranks = _launch(config, nproc, timeout_s)
    result = {"loss": ranks[0]["loss"], "reference_loss": ranks[0]["reference_loss"],
              "ranks": [{"rank": r["rank"], "coords": r["coords"], "measured": r["measured"],
                         "estimated": estimated[r["coords"].get("pp", 0)]} for r in ranks]}
    return str(cost_model.model.name), result


def _with_run(cost_model: Any, run: Any) -> Any:
    """Return `cost_model` priced with the run facts `run`."""
    return attrs.evolve(cost_model, profile=attrs.evolve(cost_model.profile, run=run))


def _held_grads(deferred: Any, plain: Any) -> float:
    """Return a stage's gradient bytes held between micro-batches, as the estimator prices them.

    The sharded gradients, plus, when the run defers their reduction, the unsharded
    ones beyond them, priced as transient memory: the transient with deferral
    less the one priced without (hpdsl/cost/formulas/stage.py `rank_memory`).
    """
    return float(deferred.grads_bytes + deferred.transient_bytes - plain.transient_bytes)


def runnable_reasons(strategy: Any) -> list[str]:
    """Return why `hpdsl train` cannot run `strategy` (empty: it can), the process count aside."""
    try:
        from hpdsl.torch.parallelize import refusals
    except ImportError as error:
        raise InputError(f"hpdsl train needs torch ({error}); install hpdsl[torch]") from None

    reasons = list(refusals(strategy))
    if strategy.precision != "fp32" or strategy.optimizer != "adam":
        reasons.append(f"precision {strategy.precision}, optimizer {strategy.optimizer}: `train` runs fp32 "
                       "with AdamW only")
    if strategy.impl != "fused":
        reasons.append(f"impl {strategy.impl}: `train` runs hpdsl's modules, which keep what fused kernels "
                       "keep (--impl fused)")
    return reasons


def _check_runnable(strategy: Any, nproc: int) -> None:
    reasons = runnable_reasons(strategy)
    if reasons:
        raise InputError("the torch backend cannot run this strategy:\n" + "\n".join(f"  - {r}" for r in reasons))
    if nproc != strategy.devices:
        raise InputError(f"--nproc {nproc} does not match the strategy's dp·tp·pp·cp = {strategy.devices}")


def _check_stages(model: Any, strategy: Any, shard_activations: bool) -> None:
    """Raise InputError if the model cannot be cut into the strategy's pipeline stages or run sequence-parallel."""
    from hpdsl.torch import sequence
    from hpdsl.torch.pipeline import model_refusals

    reasons = model_refusals(model) if strategy.pp > 1 else ()
    sp = shard_activations if strategy.sequence_parallel is None else strategy.sequence_parallel
    if sp and strategy.tp > 1 and strategy.pp == 1:  # pipeline chunks are not sequence-parallel yet
        reasons += sequence.model_refusals(model)
    if reasons:
        raise InputError("the torch backend cannot run this strategy:\n" + "\n".join(f"  - {r}" for r in reasons))


def _stage_estimates(priced: Any) -> list[dict[str, float]]:
    """Return the estimator's four byte counts for each pipeline rank (the ranks of stage i hold stage i's)."""
    return [{"params_bytes": s.params_bytes, "grads_bytes": s.grads_bytes, "optimizer_bytes": s.optimizer_bytes,
             "activation_peak_bytes": s.activation_bytes} for s in priced.memory.per_stage]


def _launch(config: dict[str, Any], nproc: int, timeout_s: int) -> list[dict[str, Any]]:
    """Run the worker on `nproc` gloo processes; return each rank's measurements, rank order."""
    with tempfile.TemporaryDirectory(prefix="hpdsl-train-") as root:
        out = Path(root)
        (out / "config.json").write_text(json.dumps(config), encoding="utf-8")
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "OMP_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                   "-m", "hpdsl.torch.train", str(out / "config.json"), str(out)]
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise InputError(f"the training job ran past --timeout {timeout_s} s") from None
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            # The exception lines when there are any; else the job's last words (a killed rank writes no Error).
            tail = [line for line in lines if "Error" in line][-3:] or lines[-3:]
            raise BuildError(f"the training job failed (exit {done.returncode}): " + " | ".join(tail))
        return [json.loads((out / f"{rank}.json").read_text(encoding="utf-8")) for rank in range(nproc)]


def render_train(name: str, strategy: Any, result: dict[str, Any]) -> str:
    """Return the readable report: losses per step beside the reference, then bytes per rank."""
    s = strategy
    stages = (f"pp {s.pp}, vpp {s.vpp} ({s.micro_batches} micro-batches), " if s.pp > 1
              else f"{s.micro_batches} micro-batches accumulated, " if s.micro_batches > 1 else "")
    etp = f", etp {s.etp}" if s.etp > 1 else ""
    lines = [f"{name}: {stages}dp {s.dp}, tp {s.tp}, cp {s.cp}, ep {s.ep}{etp}, zero {s.zero}, recompute {s.recompute}; "
             f"{len(result['ranks'])} processes (gloo), seq {s.seq_len}, micro-batch {s.micro_batch}, fp32",
             "step        loss   one process, unsharded"]
    for step, (loss, ref) in enumerate(zip(result["loss"], result["reference_loss"])):
        lines.append(f"{step:>4} {loss:>11.6f} {ref:>11.6f}   diff {abs(loss - ref):.1e}")
    lines.append("rank coords        " + "".join(f"{p.removesuffix('_bytes'):>26}" for p in _PARTS))
    lines.append(" " * 19 + "".join(f"{'measured / estimated':>26}" for _ in _PARTS))
    for rank in result["ranks"]:
        coords = ",".join(str(v) for v in rank["coords"].values())
        cells = "".join(f"{rank['measured'][p]:>12,} / {rank['estimated'][p]:>11,.0f}" for p in _PARTS)
        lines.append(f"{rank['rank']:>4} {coords:<13}{cells}")
    held = [r for r in result["ranks"] if "held_grads_bytes" in r["measured"]]
    if held:
        lines.append("gradient bytes held between micro-batches, measured / estimated: " + ", ".join(
            f"rank {r['rank']} {r['measured']['held_grads_bytes']:,} / {r['estimated']['held_grads_bytes']:,.0f}"
            for r in held))
    gaps = [r["measured"]["grad_max_diff"] for r in result["ranks"] if "grad_max_diff" in r["measured"]]
    if gaps:
        scale = max(r["measured"]["grad_max_abs"] for r in result["ranks"])
        lines.append(f"gradients after step 0 against one process: max |diff| {max(gaps):.1e} "
                     f"(largest gradient {scale:.1e})")
    return "\n".join(lines)
