"""Where one `hpdsl train` step of bench/bench_step_time.py's model goes on this machine's CPUs (issue 22).

For a strategy (dp2, tp2 or pp2, bench_step_time's; `one`: the model on one process), `hpdsl train --print-command`
gives the worker's config; this script runs the same worker code under torchrun
(hpdsl/torch/train.py's `run`, step by step) and, after --warm steps, profiles
--steps steps without it and --steps more with torch.profiler on every rank: the phases of a step (forward and
backward, gradient norm, optimizer step) by wall time, and the aten ops by self
CPU time, their calls per step, the matmuls' share and the collectives' (gloo).

    .venv/bin/python bench/profile_step.py tp2 [--warm 2 --steps 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

MATMULS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::_scaled_dot_product",
           "aten::baddbmm")


def launch(name: str, warm: int, steps: int) -> None:
    """Run the worker under torchrun on 2 processes with the config `hpdsl train` would run."""
    from bench_step_time import COMMON, MODEL, SCALE, STRATEGIES

    sets = [arg for field in SCALE for arg in ("--set", field)]
    flags, nproc = (STRATEGIES[name], 2) if name in STRATEGIES else ((), 1)
    line = subprocess.run([sys.executable, "-m", "hpdsl.cli", "train", str(MODEL), *flags, *COMMON, *sets,
                           "--nproc", str(nproc), "--steps", str(warm + 2 * steps), "--print-command"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    config = shlex.split(line)[-2]
    with tempfile.TemporaryDirectory(prefix="hpdsl-profile-") as tmp:
        (Path(tmp) / "config.json").write_text(config, encoding="utf-8")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                        str(Path(__file__).resolve()), "--worker", str(Path(tmp) / "config.json"), str(warm),
                        str(steps)], cwd=ROOT, env=env, check=True)


def worker(config_path: str, warm: int, steps: int) -> None:
    """One rank: build the job as hpdsl/torch/train.py does, time each phase, profile the last `steps` steps."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from hpdsl.torch import optim
    from hpdsl.torch.data import Tokens
    from hpdsl.torch.steps import build_job
    from hpdsl.torch.train import init_device, load_model, strategy_of

    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    device = init_device("cpu")
    model_ir, registry = load_model(config)
    strategy = strategy_of(config, model_ir, registry)
    tokens = Tokens(config["seed"], model_ir.vocab, None, "uint16")
    job = build_job(model_ir, registry, strategy, config, device, tokens)
    opt = optim.optimizer(job.params(), 1e-3)
    phases: dict[str, list[float]] = defaultdict(list)

    def one(step: int) -> None:
        marks = [time.perf_counter()]
        loss = job.step(step)
        marks.append(time.perf_counter())
        job.grad_norm()
        marks.append(time.perf_counter())
        opt.step()
        opt.zero_grad()
        marks.append(time.perf_counter())
        mean = loss.detach().to(torch.float32)
        dist.all_reduce(mean)
        mean.item()
        marks.append(time.perf_counter())
        if warm <= step < warm + steps:  # timed without the profiler
            for key, a, b in zip(("forward+backward", "grad_norm", "optimizer", "loss all-reduce"), marks, marks[1:]):
                phases[key].append(b - a)
            phases["step"].append(marks[-1] - marks[0])

    for step in range(warm):
        one(step)
    for step in range(warm, warm + steps):
        one(step)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for step in range(warm + steps, warm + 2 * steps):
            one(step)
    rank = dist.get_rank()
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in rows) / 1e6 / steps
    calls = sum(e.count for e in rows if e.key.startswith("aten::")) / steps
    mm = sum(e.self_cpu_time_total for e in rows if e.key.startswith(MATMULS)) / 1e6 / steps
    gloo = sum(e.self_cpu_time_total for e in rows if "gloo" in e.key or "c10d" in e.key) / 1e6 / steps
    lines = [f"rank {rank} (no profiler): " + ", ".join(f"{k} {sum(v) / len(v):.3f} s" for k, v in phases.items()),
             f"rank {rank}: profiled self CPU {total:.3f} s/step, aten calls {calls:.0f}/step, matmuls {mm:.3f} s, "
             f"collectives {gloo:.3f} s"]
    lines += [f"  {e.key[:48]:<48} {e.self_cpu_time_total / 1e6 / steps:8.4f} s {e.count / steps:7.0f} calls"
              for e in rows[:28]]
    dist.barrier()
    for r in range(dist.get_world_size()):
        if r == rank:
            print("\n".join(lines), flush=True)
        dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    """Parse the arguments; launch, or (under torchrun) be one rank."""
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("strategy", choices=("dp2", "tp2", "pp2", "one"),
                        help="bench_step_time's strategies, or one: the model on one process")
    parser.add_argument("--warm", type=int, default=2, help="steps before the profiled ones")
    parser.add_argument("--steps", type=int, default=2, help="profiled steps")
    args = parser.parse_args()
    launch(args.strategy, args.warm, args.steps)


if __name__ == "__main__":
    main()
