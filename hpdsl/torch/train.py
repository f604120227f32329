"""One rank of `hpdsl train`: build the model for the strategy's mesh, parallelise it, train K steps, measure.

Run by torchrun (`python -m hpdsl.torch.train CONFIG OUT_DIR`; CONFIG is a JSON
file or the JSON itself, as `hpdsl train --print-command` writes it). CONFIG
holds the spec paths, the model, the `--set` overrides, the strategy, the steps,
the seed, the device, the optimisation, the checkpoints and the data. On cuda the
rank takes GPU LOCAL_RANK and NCCL, elsewhere the CPU and gloo; meshes, pipeline
stages and batches live on that device.

The model is built on the meta device for the job's mesh (tp slices, this rank's
experts) and materialised one FSDP2 unit at a time as it is sharded
(hpdsl/torch/init.py), so no rank holds the whole model. With `validate`
every rank instead copies an unsharded reference's weights into its shards and
step 0's gradients and the losses are compared with one process
(hpdsl/torch/validate.py). Each step: the rank's rows and cp chunk of the
global batch (hpdsl/torch/data.py), forward and backward (micro-batches
accumulated, or the pipeline schedule), the global gradient norm (clipped with
`clip`), AdamW and the schedule, a checkpoint every N steps; rank 0 logs a line
(loss, grad_norm, tokens/s, MFU beside the estimate's, peak memory of every rank)
and at the end gathers every rank's measurements into OUT_DIR/result.json.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import torch
import torch.distributed as dist

from hpdsl.api import compile_paths
from hpdsl.ir.nodes import ModelIR
from hpdsl.ir.overrides import apply_sets
from hpdsl.model.strategy import Strategy
from hpdsl.registry import Registry
from hpdsl.torch import checkpoint, optim
from hpdsl.torch.data import Tokens
from hpdsl.torch.launch import LOG_PREFIX
from hpdsl.torch.process import leave
from hpdsl.torch.steps import Job, build_job

WATCH_S = 1.0
"""How often a rank checks that torchrun and the launching `hpdsl train` are still alive."""


def load_model(config: Mapping[str, Any]) -> tuple[ModelIR, Registry]:
    """Compile the config's spec paths and return its model (overrides applied) and the registry."""
    registry = compile_paths(config["paths"], stdlib=config.get("stdlib", True))
    name = config.get("model") or next(iter(registry.models))
    return apply_sets(registry.models[name], config.get("sets", {})), registry


def watch_parents() -> None:
    """Exit this rank if torchrun (its parent) or the `hpdsl train` that launched the job is gone."""
    parent, owner = os.getppid(), int(os.environ.get("HPDSL_TRAIN_OWNER", "0") or 0)

    def watch() -> None:
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != parent or (owner and not _alive(owner)):
                os._exit(1)

    threading.Thread(target=watch, name="hpdsl-watch-parents", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def init_device(kind: str) -> torch.device:
    """Join the process group on this rank's device: GPU LOCAL_RANK with NCCL, or the CPU with gloo."""
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: torch sees no GPU on this node (torch.cuda.is_available() is False)")
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        return device
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    return torch.device("cpu")


def strategy_of(config: Mapping[str, Any], model_ir: ModelIR, registry: Registry) -> Strategy:
    """Return the config's strategy, the unstated sequence parallelism read from the profile's run facts."""
    split = config["strategy"].get("pp_split")
    strategy = Strategy(**{**config["strategy"], "pp_split": None if split is None else tuple(split)})
    facts = registry.profile(model_ir.profile).run
    if strategy.sequence_parallel is None:  # unstated: the profile's run fact, as the estimator reads it
        strategy = strategy.with_(sequence_parallel=facts.shard_activations)
    return strategy


def run(config: Mapping[str, Any], out_dir: Path) -> None:
    """Train this rank's share; rank 0 writes OUT_DIR/result.json with every rank's measurements."""
    device = init_device(config.get("device", "cpu"))
    model_ir, registry = load_model(config)
    strategy = strategy_of(config, model_ir, registry)
    tokens = Tokens(config["seed"], model_ir.vocab, config.get("data"), config.get("data_dtype", "uint16"))
    job = build_job(model_ir, registry, strategy, config, device, tokens)
    losses, norms, metrics = train(job, config, device)
    out = {"rank": dist.get_rank(), "coords": job.coords, "loss": losses, "grad_norm": norms,
           "measured": job.measured}
    if dist.get_rank() == 0 and job.reference is not None:
        out["reference_loss"], out["reference_grad_norm"] = job.reference()
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.gather_object(out, gathered if dist.get_rank() == 0 else None, dst=0)
    if dist.get_rank() == 0:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "result.json").write_text(json.dumps({"ranks": gathered, "metrics": metrics}), encoding="utf-8")
    dist.destroy_process_group()


def train(job: Job, config: Mapping[str, Any], device: torch.device
          ) -> tuple[list[float], list[float], list[dict[str, Any]]]:
    """Run the job's steps (resuming from the newest save when asked); return losses, grad norms, metrics."""
    steps, settings = int(config["steps"]), config["optim"]
    opt = optim.optimizer(job.params(), float(settings["lr"]))
    schedule = optim.scheduler(opt, settings, steps)
    saving = config.get("checkpoint")
    names = checkpoint.expert_names(job.module, job.coords,
                                    int(config["strategy"]["ep"]) * int(config["strategy"]["etp"]) > 1)
    start, record = 0, checkpoint.run_record(config)
    if saving and saving.get("resume"):
        where = checkpoint.newest(saving["dir"])
        if where is None:
            raise FileNotFoundError(f"--resume: no complete save (step-N/.metadata) in {saving['dir']}")
        start = int(checkpoint.load(where, job.module, opt, schedule, names)["step"])
    losses, norms, metrics = [], [], []
    priced = config.get("priced", {})
    for step in range(start, steps):
        began = time.perf_counter()
        loss = job.step(step)
        if step == start:
            job.measure_grads()
        norm = job.grad_norm()
        if settings.get("clip") is not None:
            optim.clip(job.params(), float(settings["clip"]), norm)
        opt.step()
        schedule.step()
        opt.zero_grad()
        if step == start:
            job.measure_optimizer(opt)
        mean = loss.detach().to(device, torch.float32)  # bf16-mixed: a bf16 loss on the last stage, zeros elsewhere
        dist.all_reduce(mean)
        losses.append(mean.item())
        norms.append(norm)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        metrics.append(step_metrics(step, time.perf_counter() - began, losses[-1], norm, priced, device))
        if dist.get_rank() == 0:
            log_line(metrics[-1], steps)
        every = (saving or {}).get("every")
        if saving and every and (step + 1) % int(every) == 0:
            checkpoint.save(saving["dir"], step + 1, job.module, opt, schedule, {"step": step + 1}, names, record)
    if saving and start < steps and not (saving.get("every") and steps % int(saving["every"]) == 0):
        checkpoint.save(saving["dir"], steps, job.module, opt, schedule, {"step": steps}, names, record)  # the end
    return losses, norms, metrics


def peak_bytes(device: torch.device) -> int:
    """Return this rank's peak memory so far: the CUDA allocator's peak, or the process's peak resident set."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def step_metrics(step: int, seconds: float, loss: float, norm: float, priced: Mapping[str, float],
                 device: torch.device) -> dict[str, Any]:
    """Return one step's metrics: loss, grad norm, time, tokens/s, MFU beside the estimate's, every rank's peak."""
    peak = torch.tensor([peak_bytes(device)], dtype=torch.int64, device=device)
    peaks = [torch.zeros_like(peak) for _ in range(dist.get_world_size())]
    dist.all_gather(peaks, peak)
    tokens = float(priced.get("tokens_per_step", 0.0))
    flops, peak_flops = float(priced.get("model_flops", 0.0)), float(priced.get("peak_flops", 0.0))
    return {"step": step, "loss": loss, "grad_norm": norm, "step_time_s": seconds,
            "tokens_per_s": tokens / seconds if seconds else 0.0,
            "mfu": flops / (seconds * peak_flops) if seconds and peak_flops else 0.0,
            "estimated_step_time_s": float(priced.get("step_time_s", 0.0)),
            "estimated_mfu": float(priced.get("mfu", 0.0)),
            "peak_memory_bytes": [int(p.item()) for p in peaks]}


def log_line(m: Mapping[str, Any], steps: int) -> None:
    """Write step `m`'s live line to stderr (the launcher relays it)."""
    top = max(m["peak_memory_bytes"]) / 2**20
    sys.stderr.write(f"{LOG_PREFIX}step {m['step'] + 1}/{steps} loss {m['loss']:.4f} grad_norm {m['grad_norm']:.4g} "
                     f"{m['tokens_per_s']:,.0f} tokens/s MFU {m['mfu']:.2%} (estimate {m['estimated_mfu']:.2%}) "
                     f"peak {top:,.0f} MiB (largest rank)\n")
    sys.stderr.flush()


def read_config(argument: str) -> dict[str, Any]:
    """Return the worker's config: the JSON text itself, or the file it names."""
    text = argument if argument.lstrip().startswith("{") else Path(argument).read_text(encoding="utf-8")
    return dict(json.loads(text))


def main(argv: list[str]) -> NoReturn:
    """Entry point of `python -m hpdsl.torch.train CONFIG OUT_DIR`."""
    watch_parents()
    run(read_config(argv[0]), Path(argv[1]))
    leave(0)  # the job is done and its process group destroyed (hpdsl/torch/process.py says why not sys.exit)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(sys.argv[1:])

