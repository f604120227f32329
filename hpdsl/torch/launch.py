"""The launcher of `hpdsl train`: build the torchrun command, run it, and own every process it starts.

torchrun starts each rank in a session of its own (torch's elastic subprocess
handler), so killing torchrun, or its process group, leaves the ranks running.
Every process of a job instead carries one environment entry, HPDSL_TRAIN_JOB=<token>,
which children inherit through any session or process group; the launcher finds
the job's processes by scanning /proc for it, and on a timeout, an interrupt, a
failed rank or a dead torchrun it stops them all (SIGTERM, a grace period,
SIGKILL). torchrun's output goes to files, not pipes, so a dead torchrun is seen
at the next poll (every POLL_S seconds), not when the last rank closes its copy
of a pipe. Each rank also watches its parent (hpdsl/torch/train.py): if torchrun
goes, it exits.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from hpdsl.errors import BuildError, InputError

JOB_VARIABLE = "HPDSL_TRAIN_JOB"
"""The environment entry every process of one `hpdsl train` job carries (its value: the job's token)."""
POLL_S = 0.2
"""How often the launcher looks at torchrun (a dead one is noticed within this, plus the grace period)."""
GRACE_S = 5.0
"""How long the job's processes get to exit after SIGTERM before SIGKILL."""
LOG_PREFIX = "hpdsl train: "
"""The worker's live lines (one per step, rank 0), relayed to the launcher's stderr as they come."""


@attrs.frozen
class Rendezvous:
    """Where the job runs: one node (standalone) or `nnodes` nodes meeting at `endpoint`."""

    nnodes: int = 1
    node_rank: int = 0
    endpoint: str | None = None
    job_id: str = "hpdsl"


def torchrun_command(nproc: int, rendezvous: Rendezvous, config: str, out: str,
                     python: str = sys.executable) -> list[str]:
    """Return the torchrun command line of the worker (standalone on one node, c10d rendezvous across nodes)."""
    if rendezvous.nnodes == 1 and rendezvous.endpoint is None:
        where = ["--standalone"]
    else:
        where = [f"--nnodes={rendezvous.nnodes}", f"--node-rank={rendezvous.node_rank}", "--rdzv-backend=c10d",
                 f"--rdzv-endpoint={rendezvous.endpoint}", f"--rdzv-id={rendezvous.job_id}"]
    return [python, "-m", "torch.distributed.run", *where, f"--nproc-per-node={nproc}",
            "-m", "hpdsl.torch.train", config, out]


def shell_line(command: Sequence[str]) -> str:
    """Return `command` as one shell line (for a scheduler's job script)."""
    return " ".join(shlex.quote(part) for part in command)


def job_processes(token: str) -> list[int]:
    """Return the ids of the live processes whose environment holds HPDSL_TRAIN_JOB=`token`."""
    needle = f"{JOB_VARIABLE}={token}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def stop_job(token: str, grace_s: float = GRACE_S) -> None:
    """Stop every process of the job: SIGTERM, wait up to `grace_s`, SIGKILL what is left, wait for it to go."""
    _signal_all(job_processes(token), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while job_processes(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    for _ in range(100):  # 5 s for the kernel to reap what SIGKILL hit
        left = job_processes(token)
        if not left:
            return
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.05)


def _signal_all(pids: list[int], number: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):
            pass


class _Stopped(Exception):
    """The launcher was asked to stop (SIGTERM) while the job ran."""


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    def stop(_number: int, _frame: Any) -> None:
        raise _Stopped()

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: the caller owns the signals
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Relay:
    """Copies the worker's new live lines from the job's log to stderr."""

    def __init__(self, log: Path) -> None:
        self.log, self.offset, self.partial = log, 0, b""

    def forward(self) -> None:
        """Write the lines logged since the last call that start with LOG_PREFIX."""
        with self.log.open("rb") as source:
            source.seek(self.offset)
            chunk = source.read()
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for line in lines:
            text = line.decode("utf-8", errors="replace")
            if LOG_PREFIX in text:
                sys.stderr.write(text[text.index(LOG_PREFIX):] + "\n")
        sys.stderr.flush()


def run_job(command: list[str], env: dict[str, str], log: Path, timeout_s: float) -> tuple[int, str]:
    """Run the job to its end; return (torchrun's exit code, its output), every process of it gone.

    Raises InputError past `timeout_s`, BuildError when the launcher is stopped
    (SIGTERM); an interrupt (KeyboardInterrupt) propagates. Whichever way it ends,
    no process of the job is left.
    """
    token = secrets.token_hex(16)
    started = time.monotonic()
    with log.open("wb") as sink, _stop_on_sigterm():
        process = subprocess.Popen(command, env={**env, JOB_VARIABLE: token}, stdin=subprocess.DEVNULL,
                                   stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        relay = _Relay(log)
        try:
            while process.poll() is None:
                relay.forward()
                if time.monotonic() - started > timeout_s:
                    raise InputError(f"the training job ran past --timeout {timeout_s:g} s; every process of it "
                                     "was stopped")
                time.sleep(POLL_S)
        except _Stopped:
            raise BuildError("hpdsl train was stopped (SIGTERM); every process of the job was stopped") from None
        finally:
            stop_job(token)
            if process.poll() is None:
                process.kill()
            process.wait()
            relay.forward()
    return process.returncode, log.read_text(encoding="utf-8", errors="replace")
