"""The device time model against measured `hpdsl train` steps on this machine's CPUs (issue 22).

1. `hpdsl calibrate --threads 1 --ranks 2` writes a device .hpf of this machine,
   measured as the trainer runs: 2 processes at once, one torch thread each (what
   `hpdsl train` runs each rank with: OMP_NUM_THREADS=1), each number sustained
   over a window. It runs again just before each strategy's training, so the
   estimate sees the machine's load as the run does (the machine is shared).
2. For dp 2 (ZeRO-3, FSDP2's only mode), tp 2 and pp 2 on 2 gloo processes, a
   scaled Llama-3 (examples/llama3_8b.hpf with --set, fp32) runs `hpdsl train
   --json` for --steps steps; the measured step time is the median of the steps
   after the first (step 0 warms up: allocation, pipelining's shape inference).
3. `hpdsl estimate --cluster <calibrated.hpf> --json` prices the same strategy
   with the device time model (the default) on the calibrated device and its
   links (the file's cluster: each collective's measured bandwidth); its time
   breakdown says where the estimate puts the step's time.

Prints measured, estimated and their ratio per row, the breakdown, and the
machine's load (uptime) before and after: on a shared machine the measurement
is noisy. The target: every ratio within 25 % (0.75 to 1.25). Beside each row,
the CPU share two sustained one-thread matmul probes reach just before and after
the run, against the calibrated speed (near 1 when the load held still between
calibration and run), and the ratio divided by it.

    .venv/bin/python bench/bench_step_time.py [--steps 11] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "llama3_8b.hpf"
SCALE = ("layers=4", "hidden=256", "heads=4", "kv_heads=2", "vocab=1024", "ffn_width=768")
"""A Llama-3 of 4.6 M parameters: large enough that matmuls, not Python, take most of a CPU step."""

COMMON = ("--seq-len", "256", "--precision", "fp32")
STRATEGIES = {
    "dp2": ("--dp", "2", "--zero", "os+grad+params"),
    "tp2": ("--tp", "2"),
    "pp2": ("--pp", "2", "--global-batch", "4"),
}
"""The three strategies, as flags both `train` and `estimate` take."""

TARGET = 0.25

PROBE = """
import itertools, sys, time, torch
torch.set_num_threads(1)
pairs = itertools.cycle([(torch.randn(256, 256), torch.randn(256, 256)) for _ in range(int(sys.argv[2]))])
calls, start = 0, time.perf_counter()
while time.perf_counter() - start < float(sys.argv[1]):
    torch.matmul(*next(pairs))
    calls += 1
print(2 * 256**3 * calls / (time.perf_counter() - start))
"""
"""A sustained 256-cubed fp32 matmul loop on one thread: FLOP/s over the whole window, contention included.

Each call multiplies the next of several operand pairs, as calibration's matmuls do
(hpdsl/torch/calibrate.py COLD_BYTES): one pair stays in the cache and reads faster than calibrated."""


def hpdsl(*args: str, timeout: int = 1800, tries: int = 1) -> dict[str, object]:
    """Run the hpdsl CLI in a child process; return its --json object (exit non-zero: print stderr and stop).

    `tries` > 1 runs a failed command again, saying so (calibrate: a gloo rank has been seen to abort at
    exit, "terminate called without an active exception", about once in twenty runs).
    """
    run = subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout, check=False)
    if run.returncode != 0 and tries > 1:
        print(f"hpdsl {args[0]} failed (exit {run.returncode}: {run.stderr.strip().splitlines()[-1:]}); again")
        return hpdsl(*args, timeout=timeout, tries=tries - 1)
    if run.returncode != 0:
        sys.exit(f"hpdsl {' '.join(args[:2])} failed (exit {run.returncode}):\n{run.stderr[-2000:]}")
    return json.loads(run.stdout) if "--json" in args else {"stdout": run.stdout}


def load() -> str:
    """Return the 1, 5 and 15 minute load averages and the core count."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def cpu_share(device: Path, seconds: float = 3.0) -> float:
    """Return the share of the calibrated speed two concurrent one-thread processes sustain now (the load's toll).

    Calibration measures sustained times with its ranks at once, but the load moves between it and
    the run. Two probes run at once, as the two ranks do; their mean sustained FLOP/s over the
    calibrated FLOP/s at size 256 is the share (1: the machine as calibrated).
    """
    from hpdsl.cost.facts.devices import device_facts, get_device

    key = str(device)
    calibrated = get_device(key).peak_flops * dict(device_facts(key)[1])[256.0]
    from hpdsl.torch.calibrate import COLD_BYTES

    pairs = str(max(2, COLD_BYTES // (8 * 256 * 256)))
    probes = [subprocess.Popen([sys.executable, "-c", PROBE, str(seconds), pairs], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"}) for _ in range(2)]
    rates = [float(probe.communicate(timeout=120)[0]) for probe in probes]
    return statistics.mean(rates) / calibrated


def measure(flags: tuple[str, ...], steps: int) -> float:
    """Return the median measured step time of `hpdsl train` after its first step."""
    sets = [arg for field in SCALE for arg in ("--set", field)]
    out = hpdsl("train", str(MODEL), *flags, *COMMON, *sets, "--nproc", "2", "--steps", str(steps), "--json")
    metrics = out["metrics"]
    assert isinstance(metrics, list)
    return statistics.median(float(m["step_time_s"]) for m in metrics[1:])


def priced(flags: tuple[str, ...], device: Path) -> dict[str, object]:
    """Return `hpdsl estimate --json` of the strategy on the calibrated device, priced as `hpdsl train` runs it."""
    sets = [arg for field in SCALE for arg in ("--set", field)]
    return hpdsl("estimate", str(MODEL), *flags, *COMMON, *sets, "--cluster", str(device), "--as-trained", "cpu",
                 "--json")


def main() -> None:
    """Calibrate, train and estimate each strategy, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=11, help="training steps per strategy (the first is dropped)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="write the calibrated devices into this folder (else a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hpdsl-steptime-") as tmp:
        print(f"before: {load()}")
        rows = []
        for name, flags in STRATEGIES.items():
            device = (args.keep or Path(tmp)) / f"calibrated_{name}.hpf"
            device.parent.mkdir(parents=True, exist_ok=True)
            print(hpdsl("calibrate", "-o", str(device), "--name", f"calibrated_{name}", "--threads", "1",
                        "--ranks", "2", tries=2)["stdout"], end="")
            before = cpu_share(device)
            measured = measure(flags, args.steps)
            share = (before + cpu_share(device)) / 2
            out = priced(flags, device)
            rows.append((name, measured, float(out["step_time_s"]), share, out["time_breakdown"]))
            print(f"{name}: measured {measured:.3f} s, estimated {rows[-1][2]:.3f} s, cpu share {share:.2f} "
                  f"({load()})", flush=True)
        print(f"after: {load()}")
    print(f"\n{'strategy':<9}{'measured s':>12}{'estimated s':>13}{'ratio':>8}  within {TARGET:.0%}"
          f"{'cpu share':>11}{'ratio / share':>15}")
    for name, measured, estimated, share, _ in rows:
        ratio = estimated / measured
        within = "yes" if abs(ratio - 1) <= TARGET else "NO"
        print(f"{name:<9}{measured:>12.3f}{estimated:>13.3f}{ratio:>8.2f}  {within:<10}{share:>11.2f}{ratio / share:>15.2f}")
    print("\nratio / share: the estimate at the speed the probes sustained beside the run (the load's toll removed)")
    print("\nwhere the estimate puts each step (s):")
    for name, _, _, _, parts in rows:
        assert isinstance(parts, dict)
        print(f"  {name}: " + ", ".join(f"{k.removesuffix('_s')} {v:.3f}" for k, v in parts.items() if v))


if __name__ == "__main__":
    main()
