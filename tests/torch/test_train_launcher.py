"""`hpdsl train` owns its job: flags checked up front (exit 2), and no process of a job outlives the command.

The job's processes are found as the launcher finds them: by the environment
entry every one of them carries (hpdsl/torch/launch.py), read from /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from train_support import MIXTRAL, MIXTRAL_SMALL, ROOT, hpdsl

DP2 = ("--dp", "2", "--zero", "os+grad+params", "--nproc", "2")


@pytest.mark.parametrize(("flags", "named"), [
    (("--steps", "0"), "--steps"), (("--steps", "-1"), "--steps"), (("--seed", str(10**23)), "--seed"),
    (("--seed", "-1"), "--seed"), (("--lr", "nan"), "--lr"), (("--lr", "0"), "--lr"), (("--clip", "inf"), "--clip"),
    (("--timeout", "0"), "--timeout"), (("--nproc", "0"), "--nproc"), (("--device", "tpu"), "--device"),
    (("--warmup", "-2"), "--warmup"), (("--checkpoint-every", "0"), "--checkpoint-every"),
    (("--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"), "--node-rank 2 is not below --nnodes 2"),
    (("--nnodes", "2"), "needs --rdzv-endpoint"), (("--rdzv-endpoint", "a b:1"), "--rdzv-endpoint"),
    (("--checkpoint-every", "2"), "--checkpoint-every needs --checkpoint"), (("--resume",), "--resume needs"),
    (("--warmup", "3", "--schedule", "cosine"), "--warmup 3 leaves none of the 3 steps"),
    (("--validate", "--warmup", "1"), "--validate compares against one process"),
    (("--tokenizer", "gpt2"), "--tokenizer needs --data"), (("--data", "hf:"), "expected hf:NAME"),
    (("--pp", "0"), "pp must be at least 1"),  # once a ZeroDivisionError (bench/fuzz_train.py input 6447)
])
def test_every_bad_flag_is_a_usage_error_before_anything_runs(flags: tuple[str, ...], named: str) -> None:
    started = time.monotonic()
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, *DP2, *flags)
    assert code == 2 and named in output, output
    assert "Traceback" not in output and time.monotonic() - started < 30


def test_a_bad_token_file_is_a_usage_error(tmp_path: Path) -> None:
    odd = tmp_path / "tokens.bin"
    odd.write_bytes(b"\0" * 3)
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, *DP2, "--data", str(odd))
    assert code == 2 and "is not a whole number of uint16 tokens" in output
    text = tmp_path / "tokens.txt"
    text.write_text("1 2 3")
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, *DP2, "--data", str(text))
    assert code == 2 and "expected a .bin" in output


def test_help_offers_cuda_and_the_multi_node_flags() -> None:
    code, output = hpdsl("train", "--help")
    assert code == 0
    for flag in ("--device [cpu|cuda]", "--nnodes", "--node-rank", "--rdzv-endpoint", "--print-command",
                 "--precision", "--validate", "--lr", "--warmup", "--schedule", "--clip", "--checkpoint",
                 "--checkpoint-every", "--resume", "--data"):
        assert flag in output, flag


def test_print_command_is_the_torchrun_line_of_each_node() -> None:
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, "--dp", "4", "--zero", "os+grad+params", "--nproc", "2",
                         "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "node0:29500", "--device", "cuda",
                         "--print-command")
    assert code == 0, output
    assert "-m torch.distributed.run --nnodes=2 --node-rank=1 --rdzv-backend=c10d" in output
    assert "--rdzv-endpoint=node0:29500" in output and "--nproc-per-node=2 -m hpdsl.torch.train" in output
    assert '"device": "cuda"' in output
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, "--dp", "4", "--zero", "os+grad+params", "--nproc", "2",
                         "--print-command")
    assert code == 2 and "does not match" in output


def _job_of(owner: int) -> list[int]:
    """Return the live processes a `hpdsl train` with process id `owner` launched (their environment says so)."""
    needle = f"HPDSL_TRAIN_OWNER={owner}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if needle in Path(entry.path, "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _start(*flags: str) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "hpdsl", "train", MIXTRAL, *MIXTRAL_SMALL, *DP2, *flags]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_ranks(cli: subprocess.Popen[str], count: int) -> list[int]:
    """Return the job's rank processes once it trains (its first step's live line has come)."""
    assert cli.stderr is not None
    for line in cli.stderr:
        if "hpdsl train: step" in line:
            break
    else:  # the job ended before its first step: say so now, not after waiting for ranks that are gone
        cli.kill()
        raise AssertionError(f"the job ended before its first step: {cli.communicate()}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ranks = [pid for pid in _job_of(cli.pid) if "hpdsl.torch.train" in _cmdline(pid)
                 and "torch.distributed.run" not in _cmdline(pid)]
        if len(ranks) >= count:
            return ranks
        time.sleep(0.2)
    cli.kill()
    raise AssertionError(f"the job's {count} ranks did not start: {cli.communicate()}")


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not [pid for pid in pids if Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)]:
            return True
        time.sleep(0.1)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_timeout_stops_every_rank_torchrun_started() -> None:
    # 70 s: the two ranks' start-up and first step on a loaded 2-core machine (both xdist workers busy) took
    # over 40 s once, and the job ran past its --timeout before its first step could be seen.
    cli = _start("--steps", "10000000", "--timeout", "70")
    ranks = _wait_for_ranks(cli, 2)
    out, err = cli.communicate(timeout=90)
    assert cli.returncode == 2 and "ran past --timeout 70 s" in err, err
    assert _gone_within(ranks, 1) and not _job_of(cli.pid)


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("victim", ["torchrun", "hpdsl"])
def test_a_killed_launcher_leaves_no_process_of_the_job(victim: str) -> None:
    cli = _start("--steps", "10000000")
    ranks = _wait_for_ranks(cli, 2)
    job = _job_of(cli.pid)
    if victim == "torchrun":
        (torchrun,) = [pid for pid in job if "torch.distributed.run" in _cmdline(pid)]
        started = time.monotonic()
        os.kill(torchrun, signal.SIGKILL)
        out, err = cli.communicate(timeout=30)
        assert time.monotonic() - started < 15  # not the whole --timeout (600 s)
        assert cli.returncode == 1 and "the training job failed" in err, err
    else:
        os.kill(cli.pid, signal.SIGKILL)
        cli.communicate(timeout=30)
    assert _gone_within([*job, *ranks], 30), [(_cmdline(p), _state(p)) for p in job if Path(f"/proc/{p}").exists()]


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_rank_killed_by_a_signal_is_named_with_its_signal() -> None:
    # A rank that aborts (std::terminate, SIGABRT) writes no Python exception: the message must still say which
    # rank failed and how, from torchrun's report of the root cause (hpdsl/cli/train_launch.py failure_lines).
    cli = _start("--steps", "10000000")
    ranks = _wait_for_ranks(cli, 2)
    os.kill(ranks[-1], signal.SIGABRT)
    out, err = cli.communicate(timeout=60)
    assert cli.returncode == 1 and "the training job failed" in err, err
    assert "SIGABRT" in err and "exitcode" in err and "rank" in err, err
    assert _gone_within(ranks, 30) and not _job_of(cli.pid)


def test_a_diverged_loss_is_reported_and_exits_1() -> None:
    # The report of the steps that ran is printed; the exit status says the training did not work.
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, "--nproc", "1", "--lr", "1e30", "--steps", "3")
    assert code == 1 and "training diverged: the loss became nan at step 2" in output, output
    assert "step        loss" in output and "Traceback" not in output
