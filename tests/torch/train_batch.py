"""Several `hpdsl train` runs of one process count in one torchrun launch: each parsed and priced by the CLI's own
code, each trained by hpdsl/torch/train.py's `run` (tests/torch/train_batch_worker.py), each result assembled as
`hpdsl train --json` assembles it. A launch's ranks import torch and hpdsl once for all its runs; what each run
measures is its own: tests/torch/test_trainer.py holds a batched run, after others in its launch, equal to the
CLI's run of the same flags. Under `pytest -n N` the first worker to ask for a batch runs it and the others read
its results (`shared`, xdist's recipe for a fixture that runs once)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from filelock import FileLock  # a dependency of torch

from hpdsl.cli.train import TrainOptions, TrainPlan, plan_from_flags, train_command

WORKER = Path(__file__).with_name("train_batch_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def plan(*args: str, validate: bool = True) -> TrainPlan:
    """Return the job `hpdsl train ARGS [--validate]` would launch, its flags parsed by the command itself."""
    ctx = train_command.make_context("train", [*args, *(("--validate",) if validate else ())])
    p = dict(ctx.params)
    keys = ("steps", "seed", "validate", "lr", "warmup", "schedule", "clip", "checkpoint_every", "resume", "data",
            "tokenizer", "data_column", "data_dtype", "nnodes", "node_rank", "rdzv_endpoint")
    given = {key: p.pop(key) for key in keys}
    checkpoint = p.pop("checkpoint")
    options = TrainOptions(device=p.pop("run_device"), checkpoint=None if checkpoint is None else
                           str(checkpoint.resolve()), **given)
    for unused in ("timeout_s", "print_command", "as_json"):
        p.pop(unused)
    planned, _ = plan_from_flags(p.pop("paths"), p.pop("model"), p.pop("no_stdlib"), p.pop("sets"), p.pop("nproc"),
                                 options, p)
    return planned


def train_batch(runs: dict[str, list[str]], validate: bool = True, timeout_s: int = 1800) -> dict[str, dict]:
    """Run `hpdsl train ARGS --json` for every ARGS of `runs` (one process count) in one launch; return each result."""
    from hpdsl.torch.launch import run_job

    plans = {name: plan(*args, validate=validate) for name, args in runs.items()}
    (nproc,) = {p.nproc for p in plans.values()}
    with tempfile.TemporaryDirectory(prefix="hpdsl-train-batch-") as root:
        out = Path(root)
        (out / "configs.json").write_text(json.dumps([p.config for p in plans.values()]), encoding="utf-8")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HPDSL_TRAIN_OWNER": str(os.getpid()),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                   str(WORKER), str(out / "configs.json"), str(out)]
        code, output = run_job(command, env, out / "job.log", timeout_s)
        assert code == 0, output[-4000:]
        return {name: _result(p, json.loads((out / str(i) / "result.json").read_text(encoding="utf-8")))
                for i, (name, p) in enumerate(plans.items())}


def shared(name: str, factory: pytest.TempPathFactory, make: Callable[[], dict[str, dict]]) -> dict[str, dict]:
    """Return batch `name`'s results: `make()` on the first pytest process to ask, read back by the other workers."""
    root = factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        root = root.parent  # every worker's base folder sits in the run's
    path = root / f"train-batch-{name}.json"
    with FileLock(f"{path}.lock"):
        if path.exists():
            return dict(json.loads(path.read_text(encoding="utf-8")))
        results = make()
        path.write_text(json.dumps(results), encoding="utf-8")
        return results


_POOLS: dict[str, dict[str, list[str]]] = {}
"""Runs of several files that share one launch, by launch name: filled as pytest imports the files."""


def pool(launch: str, tag: str, runs: Mapping[str, list[str]]) -> None:
    """Add a file's `runs` to launch `launch` (one process count), each named `tag/NAME` there."""
    _POOLS.setdefault(launch, {}).update({f"{tag}/{name}": list(args) for name, args in runs.items()})


def pooled(launch: str, tag: str, factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Return `tag`'s results, by name, of the one launch of every run pooled into `launch` (`shared`).

    Every pytest process imports the same test files before it runs one (xdist checks they collect alike),
    so every worker asks for the same runs; the key names them, so a worker never reads another set's results.
    """
    runs = _POOLS[launch]
    key = hashlib.sha256(json.dumps(runs, sort_keys=True).encode()).hexdigest()[:12]
    results = shared(f"{launch}-{key}", factory, lambda: train_batch(runs))
    return {name.removeprefix(f"{tag}/"): result for name, result in results.items() if name.startswith(f"{tag}/")}


def pooled_results(launch: str, tag: str, runs: Mapping[str, list[str]]) -> Any:
    """Pool a file's `runs` into launch `launch` (`pool`); return the module fixture of their results, by name.

    Bind it to the fixture's name at module level (`eight = pooled_results("eight", "train", EIGHT)`): pytest
    names a fixture without a name of its own by the attribute that holds it.
    """
    pool(launch, tag, runs)

    @pytest.fixture(scope="module")
    def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
        """Return the result of every run the file pooled, by name (`hpdsl train ARGS --validate --json`)."""
        return pooled(launch, tag, tmp_path_factory)

    return results


def _result(planned: TrainPlan, gathered: dict[str, Any]) -> dict[str, Any]:
    """Return rank 0's gathered result as `hpdsl train --json` prints it (hpdsl/cli/train_launch.py `launch`)."""
    ranks, first = gathered["ranks"], gathered["ranks"][0]
    result: dict[str, Any] = {"device": planned.options.device, "loss": first["loss"]}
    for key in ("reference_loss", "reference_grad_norm"):
        if key in first:
            result[key] = first[key]
    result["grad_norm"] = first.get("grad_norm", [])
    result["metrics"] = gathered["metrics"]
    result["ranks"] = [{"rank": r["rank"], "coords": r["coords"], "measured": r["measured"],
                        "estimated": planned.estimated[r["coords"].get("pp", 0)]} for r in ranks]
    return result
