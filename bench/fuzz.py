"""Long fuzz campaigns: only hpdsl errors escape, every input ends in bounded time.

Six targets (bench/fuzz_targets.py): `compile` and `fmt` (grammar sentences,
shipped files mutated and spliced), `registry` (mutated registry.json through
load_registry, then priced), `import-hf` (mutated published HF configs: exit 0
only with a model that compiles), `flags` (random `estimate` / `search` flag
values parsed as the CLI parses them: JSON finite and non-negative) and
`parse-agree` (the same sources, some with names swapped for keywords, parsed by
the fast path and by Lark alone: the fast path defers or builds Lark's tree,
spans and comments included). Input i of
a campaign is rebuilt exactly from (seed, i), so a finding is replayed with
`--replay i`. Inputs run in-process; parses, the standard library, the shipped
registry and cost models are built once per process; `--workers N` spreads the
inputs over N processes.

A finding (any non-hpdsl exception, a broken contract, an input over
--seconds) is written to the log folder as JSON and the campaign goes on; turn
each into a case under tests/cases/ (or a test) with its expected diagnostic.

    nice -n 10 .venv/bin/python bench/fuzz.py --inputs 1000000 --log .fuzz-log   # every target
    .venv/bin/python bench/fuzz.py --targets compile,fmt --inputs 10000
    .venv/bin/python bench/fuzz.py --replay 12345 --seed 0                      # one input again
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The disk cache (hpdsl/diskcache.py) serves one-shot CLI runs; a campaign is one long process whose
# in-memory caches serve it better, and it must not share entries with other hpdsl versions on the
# machine (the `cache` target, bench/fuzz_cache.py, points it at folders of its own). HPDSL_CACHE_DIR
# set by the caller is kept.
os.environ.setdefault("HPDSL_CACHE_DIR", "")

from fuzz_targets import LAST, SECONDS, TARGETS, Finding  # noqa: E402
from fuzz_cache import SECONDS as CACHE_SECONDS, TARGETS as CACHE_TARGETS  # noqa: E402
from fuzz_lsp import lsp_target  # noqa: E402
from fuzz_train import TARGETS as TRAIN_TARGETS  # noqa: E402

TARGETS["lsp"] = lsp_target  # the language server fed random JSON-RPC (bench/fuzz_lsp.py)
TARGETS.update(CACHE_TARGETS)  # tampered cache folders (bench/fuzz_cache.py)
SECONDS.update(CACHE_SECONDS)
TARGETS.update(TRAIN_TARGETS)  # `train`: random train flags checked and planned (bench/fuzz_train.py)

from hpdsl.errors import HpdslError  # noqa: E402

HARD_SECONDS = 30
"""An input still running after this much CPU time is stopped (SIGVTALRM) and recorded as a hang.

Time is the process's CPU time, not the wall clock: a campaign runs niced on a
shared machine, where the wall clock measures the other jobs too."""


class _Hang(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Hang()


def _target_of(index: int, targets: list[str]) -> str:
    return targets[index % len(targets)]


def run_one(index: int, seed: int, targets: list[str], seconds: float) -> tuple[str, float, dict[str, Any] | None]:
    """Run input `index`; return (target, CPU seconds taken, the finding or None).

    A time-bound finding counts only if a second run of the same input is over the
    bound too: a stalled or descheduled machine can charge one run many seconds of
    CPU it did not spend (docs/trust.md#registries-and-fuzzing, the fuzz campaign).
    """
    target, elapsed, finding = _run_once(index, seed, targets, seconds)
    if finding is None or not _timing(finding["problem"]):
        return target, elapsed, finding
    _, again, second = _run_once(index, seed, targets, seconds)
    if second is None:
        print(f"input {index}: over the time bound once ({elapsed:.2f} s of CPU), "
              f"not on a second run ({again:.2f} s); not a finding", file=sys.stderr)
        return target, again, None
    return target, elapsed, finding


def _timing(problem: str) -> bool:
    """Whether a problem is about time alone (a slow or hanging input), not about a result."""
    return problem.startswith(("slow:", "hang:")) or " s of CPU" in problem.split("\n", 1)[0]


def _run_once(index: int, seed: int, targets: list[str], seconds: float
              ) -> tuple[str, float, dict[str, Any] | None]:
    target = _target_of(index, targets)
    rng = random.Random(f"{seed}:{index}")
    LAST.clear()
    started = time.process_time()
    signal.setitimer(signal.ITIMER_VIRTUAL, HARD_SECONDS)
    problem = None
    try:
        TARGETS[target](rng)
    except HpdslError:
        pass  # a target that lets one escape meant it as an answer
    except _Hang:
        problem = f"hang: still running after {HARD_SECONDS} s"
    except Finding as finding:
        problem = f"contract: {finding}"
    except BaseException as error:  # noqa: BLE001  (every other exception is the finding)
        if isinstance(error, KeyboardInterrupt):
            raise
        problem = "".join(traceback.format_exception_only(type(error), error)).strip()[:2000]
        problem += "\n" + "".join(traceback.format_tb(error.__traceback__)[-4:])
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    elapsed = time.process_time() - started
    bound = max(seconds, SECONDS.get(target, 0.0))
    if problem is None and elapsed > bound:
        problem = f"slow: {elapsed:.2f} s of CPU (bound {bound} s)"
    if problem is None:
        return target, elapsed, None
    return target, elapsed, {"index": index, "seed": seed, "target": target, "problem": problem,
                             "seconds": round(elapsed, 3), "input": _shown(LAST.get("input"))}


def _shown(value: Any) -> Any:
    """Return the input as JSON can hold it (non-finite floats and huge ints as text)."""
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return repr(value)[:1_000_000]


def _chunk(job: tuple[int, int, int, list[str], float]
           ) -> tuple[Counter[str], dict[str, float], list[dict[str, Any]], float]:
    start, stop, seed, targets, seconds = job
    counts: Counter[str] = Counter()
    cpu: dict[str, float] = {}
    findings = []
    slowest = 0.0
    for index in range(start, stop):
        target, elapsed, finding = run_one(index, seed, targets, seconds)
        counts[target] += 1
        cpu[target] = cpu.get(target, 0.0) + elapsed
        slowest = max(slowest, elapsed)
        if finding is not None:
            findings.append(finding)
    return counts, cpu, findings, slowest


def _warm(targets: list[str]) -> None:
    """Build each target's fixed inputs (registry, profiles, cost models) before timing anything."""
    signal.signal(signal.SIGVTALRM, _alarm)
    for index, target in enumerate(targets):
        run_one(index * len(targets) + targets.index(target), -1, targets, 1e9)


def _jobs(start: int, stop: int, seed: int, targets: list[str], seconds: float,
          size: int) -> Iterator[tuple[int, int, int, list[str], float]]:
    for first in range(start, stop, size):
        yield first, min(stop, first + size), seed, targets, seconds


def campaign(arguments: argparse.Namespace) -> int:
    """Run inputs [start, start + inputs); log progress; write findings; return how many there were."""
    targets = arguments.targets.split(",")
    log_dir = Path(arguments.log)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = (log_dir / "campaign.log").open("a")
    stop = arguments.start + arguments.inputs

    def say(line: str) -> None:
        stamped = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {line}"
        print(stamped, flush=True)
        log.write(stamped + "\n")
        log.flush()

    say(f"start: seed {arguments.seed}, inputs {arguments.start:,}..{stop:,}, targets {','.join(targets)}, "
        f"workers {arguments.workers}, bound {arguments.seconds} s, pid {os.getpid()}")
    jobs = _jobs(arguments.start, stop, arguments.seed, targets, arguments.seconds, arguments.chunk)
    if arguments.workers > 1:
        pool = multiprocessing.get_context("fork").Pool(arguments.workers, _warm, (targets,))
        results: Iterator[Any] = pool.imap(_chunk, jobs)
    else:
        _warm(targets)
        results = map(_chunk, jobs)
    done, total, found, slowest = arguments.start, Counter[str](), 0, 0.0
    cpu: dict[str, float] = {}
    signatures: set[str] = set()
    started, last = time.perf_counter(), 0.0
    for (counts, seconds, findings, slow), job in zip(results, _jobs(arguments.start, stop, arguments.seed, targets,
                                                             arguments.seconds, arguments.chunk)):
        done, slowest = job[1], max(slowest, slow)
        total.update(counts)
        for target, spent in seconds.items():
            cpu[target] = cpu.get(target, 0.0) + spent
        for finding in findings:
            found += 1
            signature = f"{finding['target']}: {finding['problem'].splitlines()[0][:120]}"
            path = log_dir / f"finding-{finding['target']}-{finding['index']}.json"
            path.write_text(json.dumps(finding, indent=2))
            if signature not in signatures:
                signatures.add(signature)
                say(f"FINDING #{found} (input {finding['index']}, {path.name}): {signature}")
        now = time.perf_counter() - started
        if now - last >= arguments.every or done == stop:
            last = now
            ran = sum(total.values())
            per_target = ", ".join(f"{t} {total[t]:,} ({1000 * cpu.get(t, 0.0) / max(total[t], 1):.1f} ms CPU each)"
                                   for t in targets)
            say(f"inputs {ran:,} (next index {done:,}; {per_target}) in {now:,.0f} s, "
                f"{ran / max(now, 1e-9):,.0f}/s, slowest {slowest:.2f} s, findings {found}")
    say(f"end: {sum(total.values()):,} inputs, {found} findings ({len(signatures)} distinct)")
    return found


def replay(arguments: argparse.Namespace) -> None:
    """Run one input again in the foreground and print what it was and what happened."""
    targets = arguments.targets.split(",")
    signal.signal(signal.SIGVTALRM, _alarm)
    target, elapsed, finding = run_one(arguments.replay, arguments.seed, targets, arguments.seconds)
    print(f"input {arguments.replay}: {target}, {elapsed:.3f} s")
    print(json.dumps(finding, indent=2) if finding else "no finding")


def main() -> None:
    """Parse the arguments; run a campaign or replay one input."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default=",".join(TARGETS),
                        help=f"comma-separated, of {', '.join(TARGETS)} (default: all, round-robin)")
    parser.add_argument("--inputs", type=int, default=10_000, help="inputs to run (all targets together)")
    parser.add_argument("--start", type=int, default=0, help="first input index (to resume a campaign)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="processes (default 1: in this one)")
    parser.add_argument("--chunk", type=int, default=100, help="inputs per unit of work")
    parser.add_argument("--seconds", type=float, default=2.0, help="the time bound per input")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between progress lines")
    parser.add_argument("--log", default=str(Path(__file__).resolve().parents[1] / ".fuzz-log"),
                        help="folder for campaign.log and the findings")
    parser.add_argument("--replay", type=int, default=None, help="run only this input index")
    arguments = parser.parse_args()
    unknown = set(arguments.targets.split(",")) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets {sorted(unknown)}; the targets are {', '.join(TARGETS)}")
    if arguments.replay is not None:
        replay(arguments)
        return
    sys.exit(1 if campaign(arguments) else 0)


if __name__ == "__main__":
    main()
