"""The `train` fuzz target: random `hpdsl train` flags, parsed and checked as the CLI does, up to the launch.

Each input is a small model's spec and `--set`s with a random choice of
train's own flags (steps, seed, device, optimisation, checkpoints, token files
among them a FIFO, /dev/zero and a folder, nodes, endpoints) and of the strategy
flags, each value drawn from a pool of good, boundary and hostile ones. The
findings follow bench/fuzz_targets.py's rules: anything but click's usage error
or an HpdslError, or a plan that breaks a contract (its config is not finite
JSON, a priced byte count is negative or not finite, its torchrun command does
not launch the processes the strategy needs or does not survive a shell's
quoting). A planned job is never launched: a campaign measures the checks
(docs/trainer.md).
"""

from __future__ import annotations

import json
import os
import random
import shlex
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
from fuzz_inputs import ROOT, flag_args
from fuzz_targets import LAST, Finding, _bad_numbers

from hpdsl.errors import HpdslError

_SMALL = {"mixtral_8x7b": ("layers=2", "hidden=64", "heads=4", "kv_heads=2", "vocab=128", "ffn_width=96",
                           "experts=4", "expert_width=32"),
          "llama3_8b": ("layers=2", "hidden=64", "heads=4", "kv_heads=2", "vocab=128", "ffn_width=96")}
_INTS = ("0", "-1", "1", "2", "3", "4", "8", "16", str(10**23), str(2**31), str(2**32), "1e3", "x", "", "٣")
_GOOD = {"--steps": ("1", "3", "100"), "--seed": ("0", "7", str(2**32 - 1)), "--timeout": ("60", "600"),
         "--device": ("cpu", "cuda"), "--lr": ("1e-3", "3e-4"), "--warmup": ("0", "1", "2"),
         "--schedule": ("constant", "cosine", "linear"), "--clip": ("1", "0.5"), "--checkpoint-every": ("1", "2"),
         "--nnodes": ("1", "2"), "--node-rank": ("0", "1"), "--data-dtype": ("uint16", "uint32"),
         "--rdzv-endpoint": ("node0:29500", "[::1]:29500"), "--gpu": ("h100", "a100")}
"""The values a user would write, drawn three times in four so that most inputs reach the plan."""
_FLOATS = ("nan", "inf", "-inf", "0", "-0", "1e-3", "3e-4", "1", "1e309", "1e-320", "0x10", "", "one")


@cache
def _files() -> dict[str, str]:
    """Return the token files a campaign draws --data from (made once per process): good, odd and hostile ones."""
    root = Path(tempfile.mkdtemp(prefix="hpdsl-fuzz-train-"))
    good = root / "tokens.bin"
    (np.arange(4096) % 128).astype(np.uint16).tofile(good)
    np.save(root / "tokens.npy", (np.arange(4096) % 128).astype(np.uint32))
    np.save(root / "matrix.npy", np.zeros((4, 4), dtype=np.float32))
    (root / "odd.bin").write_bytes(b"\1\2\3")
    (root / "empty.bin").write_bytes(b"")
    (root / "text.txt").write_text("1 2 3")
    (root / "pickle.npy").write_bytes(b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': False, "
                                      b"'shape': (1,), }" + b" " * 60 + b"\n" + b"\x80\x04N.")
    fifo = root / "fifo.bin"
    if not fifo.exists():
        os.mkfifo(fifo)
    return {"good": str(good), "npy": str(root / "tokens.npy"), "matrix": str(root / "matrix.npy"),
            "odd": str(root / "odd.bin"), "empty": str(root / "empty.bin"), "text": str(root / "text.txt"),
            "pickle": str(root / "pickle.npy"), "fifo": str(fifo), "zero": "/dev/zero", "dir": str(root),
            "missing": str(root / "missing.bin")}


def _own_flags(rng: random.Random) -> list[str]:
    """Return a random choice of train's own flags with random values."""
    files = _files()
    pools: dict[str, tuple[str, ...]] = {
        "--nproc": ("1", "2", "4", "8", "0", "-1", str(10**9), "two"), "--steps": _INTS, "--seed": _INTS,
        "--timeout": _INTS, "--device": ("cpu", "cuda", "tpu", "CPU", ""), "--lr": _FLOATS, "--warmup": _INTS,
        "--schedule": ("constant", "cosine", "linear", "step", ""), "--clip": _FLOATS,
        "--checkpoint": (files["dir"], files["good"], "/nonexistent/x", "", "ckpt"),
        "--checkpoint-every": _INTS, "--data": tuple(files.values()), "--data-dtype": ("uint16", "uint32", "int8"),
        "--nnodes": _INTS, "--node-rank": _INTS,
        "--rdzv-endpoint": ("node0:29500", "[::1]:29500", "a b:1", "h:", "x" * 300, ";rm -rf /", "h:99999"),
        "--gpu": ("h100", "h200", "a100", "mi300x", "ascend910b", "cpu", ""),
    }
    switches = ("--validate", "--resume", "--print-command")
    args: list[str] = []
    for flag in rng.sample(sorted(pools), rng.randint(0, 6)):
        good = _GOOD.get(flag, ())
        args += [flag, rng.choice(good if good and rng.random() < 0.75 else pools[flag])]
    args += [s for s in switches if rng.random() < 0.2]
    if ("--resume" in args or "--checkpoint-every" in args) and "--checkpoint" not in args and rng.random() < 0.8:
        args += ["--checkpoint", files["dir"]]
    return args


def _nproc(strategy: list[str], rng: random.Random) -> list[str]:
    """Return --nproc: mostly the strategy's process count (dp·tp·pp·cp, as far as they are whole numbers)."""
    count = 1
    for flag in ("--dp", "--tp", "--pp", "--cp"):
        if flag in strategy[:-1]:
            value = strategy[strategy.index(flag) + 1]
            count *= int(value) if value.isdigit() and len(value) < 4 else 1
    if rng.random() < 0.1:
        return []
    return ["--nproc", str(count) if rng.random() < 0.8 else rng.choice(("1", "2", "4", "0"))]


def train_target(rng: random.Random) -> None:
    """Parse random `train` flags and plan the job as the CLI does: usage errors or a sound plan, never a crash."""
    import click

    from hpdsl.cli.train import TRAIN_FLAGS, TrainOptions, plan_from_flags, train_command

    spec = rng.choice(sorted(_SMALL))
    strategy = [a for a in flag_args(TRAIN_FLAGS, rng) if rng.random() < 0.9] if rng.random() < 0.4 else []
    args = [str(ROOT / "examples" / f"{spec}.hpf"), *(f"--set={s}" for s in _SMALL[spec]), *strategy,
            *_own_flags(rng), *_nproc(strategy, rng)]
    LAST["input"] = args
    try:
        context = train_command.make_context("train", list(args))
    except click.ClickException:
        return  # click's own usage error: exit 2
    p = context.params
    flags = {name: p[name] for _, name, _, _ in TRAIN_FLAGS if name in p}
    try:
        options = TrainOptions(
            steps=p["steps"], seed=p["seed"], device=p["run_device"], validate=p["validate"], lr=p["lr"],
            warmup=p["warmup"], schedule=p["schedule"], clip=p["clip"],
            checkpoint=None if p["checkpoint"] is None else str(p["checkpoint"]),
            checkpoint_every=p["checkpoint_every"], resume=p["resume"],
            data=None if p["data"] is None else str(p["data"]), data_dtype=p["data_dtype"], nnodes=p["nnodes"],
            node_rank=p["node_rank"], rdzv_endpoint=p["rdzv_endpoint"])
        plan, strategy_ = plan_from_flags(p["paths"], p["model"], p["no_stdlib"], p["sets"], p["nproc"], options,
                                          flags)
    except HpdslError:
        return
    _check_plan(plan, strategy_)


def _check_plan(plan: object, strategy: object) -> None:
    """Raise Finding if a planned job breaks a contract."""
    config = getattr(plan, "config")
    try:
        text = json.dumps(config, allow_nan=False)
    except ValueError as error:
        raise Finding(f"the worker's config is not finite JSON: {error}") from None
    bad = list(_bad_numbers(getattr(plan, "estimated")))
    if bad:
        raise Finding(f"priced bytes that are negative or not finite: {bad[:4]}")
    command = getattr(plan, "command")(text, "out")
    if not all(isinstance(part, str) for part in command) or shlex.split(shlex.join(command)) != command:
        raise Finding("the torchrun command does not survive a shell's quoting")
    nproc = getattr(plan, "nproc") * getattr(plan, "options").nnodes
    if f"--nproc-per-node={getattr(plan, 'nproc')}" not in command or nproc != getattr(strategy, "devices"):
        raise Finding(f"the command launches {nproc} processes for {getattr(strategy, 'devices')} devices")


TARGETS = {"train": train_target}
"""This module's targets, by the name bench/fuzz.py's --targets takes."""
