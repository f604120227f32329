"""Start-up of the CLI beside `python -c pass`, interleaved in one run.

Times, as the median of interleaved rounds of fresh interpreters:
`python -c pass`, `hpdsl --help` and `hpdsl compile` of the standard library
with its report cached (hpdsl/cli/checked.py, docs/caches.md). Bytecode is cached in a
private folder as an installed package's would be (the environment may turn
writing it off), and the report cache lives in a private folder too. Targets
(issue 11): --help at most 6x, compile at most 12x `python -c pass`.

    .venv/bin/python bench/bench_startup.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "hpdsl --help": [sys.executable, "-m", "hpdsl", "--help"],
    "hpdsl compile": [sys.executable, "-m", "hpdsl", "compile"],
}
TARGETS = {"hpdsl --help": 6.0, "hpdsl compile": 12.0}


def run(command: list[str], env: dict[str, str]) -> float:
    """Return the wall time of one run; fail loudly if the command fails."""
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    """Warm the caches, then time the commands in interleaved rounds and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=f"{cache}/pyc", HPDSL_CACHE_DIR=f"{cache}/hpdsl")
        for command in COMMANDS.values():  # warm: bytecode and the report written
            run(command, env)
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(args.rounds):
            for name, command in COMMANDS.items():
                times[name].append(run(command, env))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<18}{'median ms':>11}{'x python -c pass':>18}{'target':>9}")
    for name, samples in times.items():
        ratio = statistics.median(samples) / base
        target = TARGETS.get(name)
        verdict = "" if target is None else f"<= {target:.0f}x {'met' if ratio <= target else 'NOT met'}"
        print(f"{name:<18}{statistics.median(samples) * 1e3:>11.1f}{ratio:>18.1f}  {verdict}")


if __name__ == "__main__":
    main()
