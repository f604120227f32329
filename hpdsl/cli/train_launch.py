"""`hpdsl train`'s job: check the strategy runs, price it as the backend runs it, launch torchrun, read rank 0's JSON.

The estimate is told what hpdsl's torch backend does and keeps
(hpdsl/cost/facts/backend.py `backend_facts`, `backend_strategy`), so its bytes
are the ones each rank measures. hpdsl/torch/launch.py owns the job: no process
of it outlives the command (docs/trainer.md).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import attrs

from hpdsl.cli.train_options import TrainOptions, check_options
from hpdsl.errors import BuildError, InputError

_FP32 = {"precision": "fp32", "seq_len": 32}
"""train's defaults where estimate's differ: fp32 (exact against one process) on short sequences."""


def plan_from_flags(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...], nproc: int,
                    options: TrainOptions, flags: dict[str, Any]) -> tuple[TrainPlan, Any]:
    """Check the options and the strategy flags, price the strategy; return the job to launch and the strategy."""
    from hpdsl.cli.report import strategy_from_flags

    check_options(options)
    strategy = strategy_from_flags({**_FP32, **{k: v for k, v in flags.items() if v is not None}})
    plan = plan_training(paths, model, no_stdlib, sets, strategy, nproc=nproc, options=options)
    return with_dataset(plan), strategy


def with_dataset(plan: TrainPlan) -> TrainPlan:
    """Return `plan` reading its Hugging Face dataset as a token file (tokenised once, cached); else `plan`."""
    from hpdsl.torch.hf_data import is_dataset, token_file

    o = plan.options
    if o.data is None or not is_dataset(o.data):
        return plan
    path = token_file(o.data, tokenizer=o.tokenizer, column=o.data_column)
    return attrs.evolve(plan, config={**plan.config, "data": str(path), "data_dtype": "uint32",
                                      "dataset": o.data})


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
    """Price `strategy`, train it on `nproc` CPU processes; return the model's name and the JSON.

    At fp32 the run is compared with one process (--validate); at bf16-mixed, whose
    one-process reference would be fp32, it is built on the meta device as `train` builds it.
    """
    plan = plan_training(paths, model, no_stdlib, sets, strategy, nproc=nproc,
                         options=TrainOptions(steps=steps, seed=seed, validate=strategy.precision == "fp32"))
    result = launch(plan, timeout_s)
    assert result is not None  # one node: node 0
    return plan.name, result


def plan_training(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                  strategy: Any, *, nproc: int, options: TrainOptions) -> TrainPlan:
    """Check `strategy` and `options`, price the strategy as the backend runs it; return the job to launch."""
    from hpdsl.cli.models import load_cost_model
    from hpdsl.cost.estimate import estimate
    from hpdsl.cost.facts.backend import as_trained
    from hpdsl.cost.feasibility.reasons import require_valid
    from hpdsl.ir.nodes import evolve
    from hpdsl.ir.overrides import declared_fields, parse_sets

    cost_model = load_cost_model(paths, model, stdlib=not no_stdlib, sets=sets)
    parsed = parse_sets(sets, declared_fields(cost_model.profile, cost_model.families))
    require_valid(strategy, cost_model)  # what the estimator refuses (pp 0 among them), before the backend's checks
    _check_runnable(strategy, nproc * options.nnodes)
    _check_stages(cost_model.model, strategy, cost_model.profile.run.shard_activations)
    # Priced as the backend runs it on its device: its gradients, loss, gathers, kernels, what each precision keeps.
    trained, priced_strategy = as_trained(cost_model, strategy, options.device)
    run = trained.profile.run
    priced = estimate(trained, priced_strategy)
    estimated = _stage_estimates(priced)
    if strategy.pp == 1 and strategy.micro_batches > 1:
        undeferred = estimate(_with_run(cost_model, evolve(run, deferred_grad_accumulation=False)), priced_strategy)
        for stage, deferred, plain in zip(estimated, priced.memory.per_stage, undeferred.memory.per_stage):
            stage["held_grads_bytes"] = _held_grads(deferred, plain)
    config = {"paths": [str(Path(p).resolve()) for p in paths], "model": cost_model.model.name,
              "stdlib": not no_stdlib, "sets": parsed, "strategy": attrs.asdict(strategy), **options.worker(),
              "priced": _priced_speed(priced)}
    if options.resume and options.checkpoint is not None:
        _check_resumable(options.checkpoint, config)
    return TrainPlan(str(cost_model.model.name), config, estimated, nproc, options)


def _check_resumable(root: str, config: dict[str, Any]) -> None:
    """Raise BuildError (exit 1) if the newest save under `root` was written for another model or strategy."""
    from hpdsl.torch.checkpoint import refusal

    problem = refusal(root, config)
    if problem:
        raise BuildError(problem)
def launch(plan: TrainPlan, timeout_s: int) -> dict[str, Any] | None:
    """Run the planned job on this node; return rank 0's gathered result (None on a node other than 0)."""
    ranks, metrics = _launch(plan, timeout_s)
    if ranks is None:
        return None
    first = ranks[0]
    result: dict[str, Any] = {"device": plan.options.device, "loss": first["loss"]}
    for key in ("reference_loss", "reference_grad_norm"):  # --validate: one process's
        if key in first:
            result[key] = first[key]
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
    """Raise InputError if the backend refuses `strategy` or the processes are not its devices."""
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
            raise BuildError(f"the training job failed (exit {code}): " + " | ".join(failure_lines(output)))
        if plan.options.node_rank != 0:
            return None, []
        gathered = json.loads((out / "result.json").read_text(encoding="utf-8"))
        return gathered["ranks"], gathered["metrics"]


ROOT_CAUSE = ("rank", "exitcode", "traceback")
"""The fields of torchrun's failure report that say which rank failed and how (its exit code or signal)."""
MAX_RANKS_SAID = 4
"""How many failed ranks the message names (a large job lists every rank torchrun stopped)."""


def failure_lines(output: str) -> list[str]:
    """Return the lines of a failed job's output that say why: its exceptions, aborts and torchrun's root cause."""
    lines = [" ".join(line.split()) for line in output.splitlines() if line.strip() and not line.startswith("step ")]
    # A rank killed by a signal or aborted by C++ (std::terminate) writes no Python exception: torchrun's report
    # of the root cause (rank, exitcode, traceback: "Signal 6 (SIGABRT) received by PID ...") says what happened.
    # torchrun lists every failed rank, the root cause last: the first rank it saw fail, which is often a
    # rank whose peer died under it (its gloo connection closed), not the rank that died.
    said = [line for line in lines if ("Error" in line and "ChildFailedError" not in line)  # not torchrun's own
            or line.startswith("terminate called")][-3:]
    ranks = [line for line in lines if line.split(":")[0].strip() in ROOT_CAUSE]
    return [*said, *dict.fromkeys(ranks[:3 * MAX_RANKS_SAID])] or lines[-3:]

