"""`hpdsl train`: run a strategy for K steps on N processes (gloo on CPU, NCCL on CUDA) beside the estimate.

The command checks every flag and prices the strategy first (the estimator, in
this process), then launches torchrun with hpdsl/torch/train.py as the worker
(hpdsl/torch/launch.py owns the job: no process of it outlives the command) and
reads back rank 0's gathered JSON. The trainer's flags, metrics and a
multi-node recipe: docs/trainer.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import click

from hpdsl.cli.app import emit_json, json_option
from hpdsl.cli.options import DEVICES, ESTIMATE_FLAGS, flag_options, model_option, no_stdlib_option, set_option, spec_paths
from hpdsl.errors import BuildError, InputError

_FP32 = {"precision": "fp32", "seq_len": 32}
_PARTS = ("params_bytes", "grads_bytes", "optimizer_bytes", "activation_peak_bytes")
TRAIN_FLAGS = (*(row for row in ESTIMATE_FLAGS if row[0] != "--device"),
               ("--gpu", "device", DEVICES, "the accelerator the estimate prices, whose peak sets the MFU "
                                            "(default h100)"))
"""The strategy flags of `train`: estimate's, the priced accelerator named --gpu (--device is where it runs)."""
_SEED_MAX = 2**32 - 1  # the tokens' generator seeds with seed·1,000,003 + step, under 2^63
_ENDPOINT = re.compile(r"^[A-Za-z0-9._-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:]+\](:[0-9]{1,5})?$")


@attrs.frozen
class TrainOptions:
    """How `hpdsl train` runs a strategy: steps, seed, device, optimisation, checkpoints, data, nodes."""

    steps: int = 3
    seed: int = 0
    device: str = "cpu"
    validate: bool = True
    lr: float = 1e-3
    warmup: int = 0
    schedule: str = "constant"
    clip: float | None = None
    checkpoint: str | None = None
    checkpoint_every: int | None = None
    resume: bool = False
    data: str | None = None
    data_dtype: str = "uint16"
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None

    def worker(self) -> dict[str, Any]:
        """Return what the worker reads of these options (hpdsl/torch/train.py)."""
        return {"steps": self.steps, "seed": self.seed, "device": self.device, "validate": self.validate,
                "optim": {"lr": self.lr, "warmup": self.warmup, "schedule": self.schedule, "clip": self.clip},
                "checkpoint": None if self.checkpoint is None else {
                    "dir": self.checkpoint, "every": self.checkpoint_every, "resume": self.resume},
                "data": self.data, "data_dtype": self.data_dtype}


def _finite(low: float, *, above: bool) -> Any:
    """Return a click callback taking a finite float over `low` (or at least `low`), else a usage error."""
    def check(_context: click.Context, param: click.Parameter, value: float | None) -> float | None:
        if value is None:
            return None
        if not math.isfinite(value) or (value <= low if above else value < low):
            bound = f"over {low:g}" if above else f"at least {low:g}"
            raise click.BadParameter(f"{value} is not a finite number {bound}", param=param)
        return value
    return check


def _endpoint(_context: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not _ENDPOINT.match(value):
        raise click.BadParameter(f"{value!r} is not HOST or HOST:PORT", param=param)
    return value


@click.command("train")
@spec_paths
@model_option
@no_stdlib_option
@flag_options(TRAIN_FLAGS)
@set_option
@click.option("--nproc", type=click.IntRange(1, 4096), required=True,
              help="processes per node (all nodes: dp·tp·pp·cp of the strategy)")
@click.option("--steps", type=click.IntRange(1, 10**7), default=3, show_default=True, help="training steps")
@click.option("--seed", type=click.IntRange(0, _SEED_MAX), default=0, show_default=True,
              help="seed of the weights and the synthetic tokens")
@click.option("--timeout", "timeout_s", type=click.IntRange(1, 10**7), default=600, show_default=True,
              help="seconds before the whole job is stopped")
@click.option("--device", "run_device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="cpu: gloo; cuda: NCCL, one GPU per process (LOCAL_RANK)")
@click.option("--validate", is_flag=True,
              help="also train the unsharded model in one process and compare losses and step 0's gradients")
@click.option("--lr", type=float, default=1e-3, show_default=True, callback=_finite(0.0, above=True),
              help="peak learning rate (AdamW)")
@click.option("--warmup", type=click.IntRange(0, 10**7), default=0, show_default=True,
              help="steps of linear warmup to --lr")
@click.option("--schedule", type=click.Choice(["constant", "cosine", "linear"]), default="constant",
              show_default=True, help="decay after warmup, to 0 at the last step")
@click.option("--clip", type=float, default=None, callback=_finite(0.0, above=True),
              help="clip the global gradient norm to this (every mesh's norms combined)")
@click.option("--checkpoint", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="folder of torch.distributed.checkpoint saves (model, optimizer, schedule, data position)")
@click.option("--checkpoint-every", type=click.IntRange(1, 10**7), default=None, help="save every N steps")
@click.option("--resume", is_flag=True, help="continue from the newest save in --checkpoint")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="token file: uint16/uint32 .bin or .npy (default: synthetic tokens from --seed)")
@click.option("--data-dtype", type=click.Choice(["uint16", "uint32"]), default="uint16", show_default=True,
              help="the width of a .bin token file's ids")
@click.option("--nnodes", type=click.IntRange(1, 4096), default=1, show_default=True, help="nodes of the job")
@click.option("--node-rank", type=click.IntRange(0, 4095), default=0, show_default=True, help="this node's index")
@click.option("--rdzv-endpoint", default=None, callback=_endpoint,
              help="HOST:PORT where the nodes meet (torchrun's c10d rendezvous)")
@click.option("--print-command", is_flag=True, help="print the torchrun command for a scheduler instead of running")
@json_option
def train_command(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                  nproc: int, timeout_s: int, print_command: bool, as_json: bool, steps: int, seed: int,
                  run_device: str, validate: bool, lr: float, warmup: int, schedule: str, clip: float | None,
                  checkpoint: Path | None, checkpoint_every: int | None, resume: bool, data: Path | None,
                  data_dtype: str, nnodes: int, node_rank: int, rdzv_endpoint: str | None, **flags: Any) -> None:
    """Train a strategy K steps on N processes; print the losses, metrics and measured bytes beside the estimate.

    \b
    Examples:
      hpdsl train examples/mixtral_8x7b.hpf --dp 4 --ep 2 --zero os+grad+params --nproc 4 \\
          --set layers=2 --set hidden=64 --set heads=4 --set kv_heads=2 --set vocab=128 --set experts=4 --set expert_width=32
      hpdsl train examples/llama3_8b.hpf --dp 16 --zero os+grad+params --precision bf16-mixed --device cuda \\
          --seq-len 8192 --nproc 8 --nnodes 2 --node-rank 0 --rdzv-endpoint node0:29500 --steps 1000 --lr 3e-4 \\
          --warmup 100 --schedule cosine --print-command   # the torchrun line for node 0 of a 2-node GPU job
    """
    plan, strategy = plan_from_flags(paths, model, no_stdlib, sets, nproc, TrainOptions(
        steps=steps, seed=seed, device=run_device, validate=validate, lr=lr, warmup=warmup, schedule=schedule, clip=clip,
        checkpoint=None if checkpoint is None else str(checkpoint.resolve()), checkpoint_every=checkpoint_every,
        resume=resume, data=None if data is None else str(data.resolve()), data_dtype=data_dtype, nnodes=nnodes,
        node_rank=node_rank, rdzv_endpoint=rdzv_endpoint), flags)
    if print_command:
        from hpdsl.torch.launch import shell_line

        click.echo(shell_line(plan.command(json.dumps(plan.config), "hpdsl-train-out")))
        return
    result = launch(plan, timeout_s)
    if result is None:
        click.echo(f"node {node_rank}: its ranks finished; the job's results are on node 0", err=True)
        return
    if as_json:
        emit_json(result)
    else:
        click.echo(render_train(plan.name, strategy, result))


def plan_from_flags(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...], nproc: int,
                    options: TrainOptions, flags: dict[str, Any]) -> tuple[TrainPlan, Any]:
    """Check the options and the strategy flags, price the strategy; return the job to launch and the strategy."""
    from hpdsl.cli.report import strategy_from_flags

    _check_options(options)
    strategy = strategy_from_flags({**_FP32, **{k: v for k, v in flags.items() if v is not None}})
    return plan_training(paths, model, no_stdlib, sets, strategy, nproc=nproc, options=options), strategy


def _check_options(options: TrainOptions) -> None:
    """Raise InputError (exit 2) for flags that cannot go together."""
    problems = []
    if options.node_rank >= options.nnodes:
        problems.append(f"--node-rank {options.node_rank} is not below --nnodes {options.nnodes}")
    if options.nnodes > 1 and options.rdzv_endpoint is None:
        problems.append(f"--nnodes {options.nnodes} needs --rdzv-endpoint HOST:PORT (where the nodes meet)")
    if options.checkpoint_every is not None and options.checkpoint is None:
        problems.append("--checkpoint-every needs --checkpoint DIR")
    if options.resume and options.checkpoint is None:
        problems.append("--resume needs --checkpoint DIR")
    if options.warmup >= options.steps and options.schedule != "constant":
        problems.append(f"--warmup {options.warmup} leaves none of the {options.steps} steps to --schedule "
                        f"{options.schedule}")
    if options.validate and (options.data is not None or options.resume or options.clip is not None
                             or options.warmup or options.schedule != "constant"):
        problems.append("--validate compares against one process with the default optimisation on synthetic "
                        "tokens: drop --data, --resume, --clip, --warmup and --schedule, or --validate")
    if options.data is not None:
        from hpdsl.torch.data import data_refusal

        problem = data_refusal(options.data, options.data_dtype)
        if problem:
            problems.append(problem)
    if problems:
        raise InputError("; ".join(problems))


@attrs.frozen
class TrainPlan:
    """A checked, priced training job, ready to launch: the worker's config and the estimate per stage."""

    name: str
    config: dict[str, Any]
    estimated: list[dict[str, float]]
    nproc: int
    options: TrainOptions

    def command(self, config_arg: str, out: str) -> list[str]:
        """Return this node's torchrun command line, reading the worker config from `config_arg`."""
        from hpdsl.torch.launch import Rendezvous, torchrun_command

        o = self.options
        where = Rendezvous(nnodes=o.nnodes, node_rank=o.node_rank, endpoint=o.rdzv_endpoint)
        return torchrun_command(self.nproc, where, config_arg, out)


def run_training(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                 strategy: Any, *, nproc: int, steps: int = 3, seed: int = 0,
                 timeout_s: int = 600) -> tuple[str, dict[str, Any]]:
    """Price `strategy`, train it on `nproc` CPU processes against one process; return the model's name and the JSON."""
    plan = plan_training(paths, model, no_stdlib, sets, strategy, nproc=nproc,
                         options=TrainOptions(steps=steps, seed=seed, validate=True))
    result = launch(plan, timeout_s)
    assert result is not None  # one node: node 0
    return plan.name, result


def plan_training(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                  strategy: Any, *, nproc: int, options: TrainOptions) -> TrainPlan:
    """Check `strategy` and `options`, price the strategy as the backend runs it; return the job to launch."""
    from hpdsl.cli.models import load_cost_model
    from hpdsl.cost.facts.backend import backend_facts
    from hpdsl.cost.estimate import estimate
    from hpdsl.ir.nodes import evolve
    from hpdsl.ir.overrides import declared_fields, parse_sets

    from hpdsl.cost.feasibility.reasons import require_valid

    cost_model = load_cost_model(paths, model, stdlib=not no_stdlib, sets=sets)
    parsed = parse_sets(sets, declared_fields(cost_model.profile, cost_model.families))
    require_valid(strategy, cost_model)  # what the estimator refuses (pp 0 among them), before the backend's checks
    _check_runnable(strategy, nproc * options.nnodes)
    _check_stages(cost_model.model, strategy, cost_model.profile.run.shard_activations)
    # Priced as the backend runs it (hpdsl/cost/facts/backend.py): its gradients, loss, gathers, CPU kernels.
    run = backend_facts(cost_model.profile.run, strategy)
    if options.device == "cuda":  # SDPA picks its flash kernel on a GPU: no CPU math-kernel scores kept
        run = evolve(run, cpu_attention=False)
    priced_strategy = strategy
    if strategy.precision == "bf16-mixed":
        # FSDP2's MixedPrecisionPolicy keeps the fp32 parameter as the one copy the optimizer updates (no
        # separate master) and casts a bf16 copy for each forward: 4 B weights, no master, 4 B gradients.
        run = evolve(run, main_param_bytes=0)
        priced_strategy = strategy.with_(param_bytes=4)
    priced = estimate(_with_run(cost_model, run), priced_strategy)
    estimated = _stage_estimates(priced)
    if strategy.pp == 1 and strategy.micro_batches > 1:
        undeferred = estimate(_with_run(cost_model, evolve(run, deferred_grad_accumulation=False)), priced_strategy)
        for stage, deferred, plain in zip(estimated, priced.memory.per_stage, undeferred.memory.per_stage):
            stage["held_grads_bytes"] = _held_grads(deferred, plain)
    config = {"paths": [str(Path(p).resolve()) for p in paths], "model": cost_model.model.name,
              "stdlib": not no_stdlib, "sets": parsed, "strategy": attrs.asdict(strategy), **options.worker(),
              "priced": _priced_speed(priced)}
    return TrainPlan(str(cost_model.model.name), config, estimated, nproc, options)


def launch(plan: TrainPlan, timeout_s: int) -> dict[str, Any] | None:
    """Run the planned job on this node; return rank 0's gathered result (None on a node other than 0)."""
    ranks, metrics = _launch(plan, timeout_s)
    if ranks is None:
        return None
    first = ranks[0]
    result: dict[str, Any] = {"device": plan.options.device, "loss": first["loss"]}
    if "reference_loss" in first:
        result["reference_loss"] = first["reference_loss"]
    result["grad_norm"] = first.get("grad_norm", [])
    result["metrics"] = metrics
    result["ranks"] = [{"rank": r["rank"], "coords": r["coords"], "measured": r["measured"],
                        "estimated": plan.estimated[r["coords"].get("pp", 0)]} for r in ranks]
    return result


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
    if strategy.optimizer != "adam":  # the precisions: the backend's refusals (hpdsl/torch/parallelize.py)
        reasons.append(f"optimizer {strategy.optimizer}: `train` runs AdamW only")
    if strategy.impl != "fused":
        reasons.append(f"impl {strategy.impl}: `train` runs hpdsl's modules, which keep what fused kernels "
                       "keep (--impl fused)")
    return reasons


def _check_runnable(strategy: Any, nproc: int) -> None:
    reasons = runnable_reasons(strategy)
    if reasons:
        raise InputError("the torch backend cannot run this strategy:\n" + "\n".join(f"  - {r}" for r in reasons))
    if nproc != strategy.devices:
        raise InputError(f"--nproc × --nnodes = {nproc} does not match the strategy's dp·tp·pp·cp = "
                         f"{strategy.devices}")


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
             "activation_peak_bytes": s.activation_bytes, "total_bytes": s.total_bytes}
            for s in priced.memory.per_stage]


def _priced_speed(priced: Any) -> dict[str, float]:
    """Return what the worker sets its measured speed beside: the step's model FLOPs, the peak, the estimate's."""
    from hpdsl.cost.facts.devices import get_device

    peak = get_device(priced.strategy.device).peak_flops * priced.strategy.devices
    return {"model_flops": float(priced.flops.model_total), "peak_flops": float(peak),
            "step_time_s": float(priced.step_time_s), "mfu": float(priced.mfu),
            "tokens_per_step": float(priced.tokens_per_step)}


def _launch(plan: TrainPlan, timeout_s: int) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """Run the worker on this node's processes; return rank 0's gathered ranks (None off node 0) and step metrics."""
    from hpdsl.torch.launch import run_job

    with tempfile.TemporaryDirectory(prefix="hpdsl-train-") as root:
        out = Path(root)
        (out / "config.json").write_text(json.dumps(plan.config), encoding="utf-8")
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HPDSL_TRAIN_OWNER": str(os.getpid()),
               "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        code, output = run_job(plan.command(str(out / "config.json"), str(out)), env, out / "job.log", timeout_s)
        if code != 0:
            lines = [line for line in output.splitlines() if line.strip() and not line.startswith("step ")]
            # The exception lines when there are any; else the job's last words (a killed rank writes no Error).
            tail = [line for line in lines if "Error" in line][-3:] or lines[-3:]
            raise BuildError(f"the training job failed (exit {code}): " + " | ".join(tail))
        if plan.options.node_rank != 0:
            return None, []
        gathered = json.loads((out / "result.json").read_text(encoding="utf-8"))
        return gathered["ranks"], gathered["metrics"]


def render_train(name: str, strategy: Any, result: dict[str, Any]) -> str:
    """Return the readable report: losses per step beside the reference, then bytes per rank."""
    s = strategy
    stages = (f"pp {s.pp}, vpp {s.vpp} ({s.micro_batches} micro-batches), " if s.pp > 1
              else f"{s.micro_batches} micro-batches accumulated, " if s.micro_batches > 1 else "")
    etp = f", etp {s.etp}" if s.etp > 1 else ""
    device = "NCCL" if result.get("device") == "cuda" else "gloo"
    lines = [f"{name}: {stages}dp {s.dp}, tp {s.tp}, cp {s.cp}, ep {s.ep}{etp}, zero {s.zero}, recompute {s.recompute}; "
             f"{len(result['ranks'])} processes ({device}), seq {s.seq_len}, micro-batch {s.micro_batch}, "
             f"{s.precision}"]
    reference = result.get("reference_loss")
    lines.append("step        loss   grad_norm    tokens/s   MFU (est.)" + ("   one process" if reference else ""))
    metrics = result.get("metrics") or [{} for _ in result["loss"]]
    for step, (loss, m) in enumerate(zip(result["loss"], metrics)):
        row = (f"{m.get('step', step):>4} {loss:>11.6f} {m.get('grad_norm', float('nan')):>11.4g} "
               f"{m.get('tokens_per_s', 0.0):>11,.0f}   {m.get('mfu', 0.0):.2%} ({m.get('estimated_mfu', 0.0):.2%})")
        if reference:
            ref = reference[step]
            row += f"   {ref:>11.6f} diff {abs(loss - ref):.1e}"
        lines.append(row)
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
    if metrics and metrics[-1].get("peak_memory_bytes"):
        kind = "CUDA allocator peak" if result.get("device") == "cuda" else "peak resident set"
        lines.append(f"peak memory per rank ({kind}): " + ", ".join(
            f"rank {i} {peak / 2**20:,.0f} MiB" for i, peak in enumerate(metrics[-1]["peak_memory_bytes"])))
    gaps = [r["measured"]["grad_max_diff"] for r in result["ranks"] if "grad_max_diff" in r["measured"]]
    if gaps:
        scale = max(r["measured"]["grad_max_abs"] for r in result["ranks"])
        lines.append(f"gradients after step 0 against one process: max |diff| {max(gaps):.1e} "
                     f"(largest gradient {scale:.1e})")
    return "\n".join(lines)
