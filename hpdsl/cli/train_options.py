"""`hpdsl train`'s own options: what the worker is told, their click checks, and the flags that cannot go together.

The strategy flags are estimate's (hpdsl/cli/options.py), with the priced
accelerator named `--gpu`, because `--device` says where the job runs
(docs/trainer.md, "Flags").
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import attrs
import click

from hpdsl.cli.options import DEVICES, ESTIMATE_FLAGS
from hpdsl.errors import InputError

TRAIN_FLAGS = (*(row for row in ESTIMATE_FLAGS if row[0] != "--device"),
               ("--gpu", "device", DEVICES, "the accelerator the estimate prices, whose peak sets the MFU "
                                            "(default h100)"))
"""The strategy flags of `train`: estimate's, the priced accelerator named --gpu (--device is where it runs)."""
SEED_MAX = 2**32 - 1  # the tokens' generator seeds with seed·1,000,003 + step, under 2^63
_ENDPOINT = re.compile(r"^[A-Za-z0-9._-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:]+\](:[0-9]{1,5})?$")


@attrs.frozen
class TrainOptions:
    """How `hpdsl train` runs a strategy: steps, seed, device, optimisation, checkpoints, data, nodes."""

    steps: int = 3
    seed: int = 0
    device: str = "cpu"
    validate: bool = True
    lr: float = 1e-3
    warmup: int = 0
    schedule: str = "constant"
    clip: float | None = None
    checkpoint: str | None = None
    checkpoint_every: int | None = None
    resume: bool = False
    data: str | None = None
    data_dtype: str = "uint16"
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    tokenizer: str | None = None
    data_column: str | None = None

    def worker(self) -> dict[str, Any]:
        """Return what the worker reads of these options (hpdsl/torch/train.py)."""
        return {"steps": self.steps, "seed": self.seed, "device": self.device, "validate": self.validate,
                "optim": {"lr": self.lr, "warmup": self.warmup, "schedule": self.schedule, "clip": self.clip},
                "checkpoint": None if self.checkpoint is None else {
                    "dir": self.checkpoint, "every": self.checkpoint_every, "resume": self.resume},
                "data": self.data, "data_dtype": self.data_dtype}


def finite(low: float, *, above: bool) -> Any:
    """Return a click callback taking a finite float over `low` (or at least `low`), else a usage error."""
    def check(_context: click.Context, param: click.Parameter, value: float | None) -> float | None:
        if value is None:
            return None
        if not math.isfinite(value) or (value <= low if above else value < low):
            bound = f"over {low:g}" if above else f"at least {low:g}"
            raise click.BadParameter(f"{value} is not a finite number {bound}", param=param)
        return value
    return check


def endpoint(_context: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Return `value` if it is HOST or HOST:PORT (an IPv6 host in brackets), else a usage error."""
    if value is not None and not _ENDPOINT.match(value):
        raise click.BadParameter(f"{value!r} is not HOST or HOST:PORT", param=param)
    return value


def data_source(_context: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Return --data as the worker reads it: hf:NAME[:SPLIT] as given, a path that exists made absolute."""
    if value is None or value.startswith("hf:"):
        return value
    path = Path(value)
    if not path.exists():
        raise click.BadParameter(f"{value!r}: no such file or folder (expected a token file, a dataset folder or "
                                 "hf:NAME[:SPLIT])", param=param)
    return str(path.resolve())


def check_options(options: TrainOptions) -> None:
    """Raise InputError (exit 2) for flags that cannot go together."""
    problems = []
    if options.node_rank >= options.nnodes:
        problems.append(f"--node-rank {options.node_rank} is not below --nnodes {options.nnodes}")
    if options.nnodes > 1 and options.rdzv_endpoint is None:
        problems.append(f"--nnodes {options.nnodes} needs --rdzv-endpoint HOST:PORT (where the nodes meet)")
    if options.checkpoint_every is not None and options.checkpoint is None:
        problems.append("--checkpoint-every needs --checkpoint DIR")
    if options.resume and options.checkpoint is None:
        problems.append("--resume needs --checkpoint DIR")
    if options.warmup >= options.steps and options.schedule != "constant":
        problems.append(f"--warmup {options.warmup} leaves none of the {options.steps} steps to --schedule "
                        f"{options.schedule}")
    if options.validate and (options.data is not None or options.resume or options.warmup
                             or options.schedule != "constant"):
        problems.append("--validate compares against one process at a constant --lr (clipped by --clip) on "
                        "synthetic tokens: drop --data, --resume, --warmup and --schedule, or --validate")
    problems += _data_problems(options)
    if problems:
        raise InputError("; ".join(problems))


def _data_problems(options: TrainOptions) -> list[str]:
    """Return what is wrong with --data and the flags that go with it."""
    from hpdsl.torch.hf_data import dataset_refusal, is_dataset

    if options.data is None:
        return [f"{flag} needs --data (a Hugging Face dataset)" for flag, value in
                (("--tokenizer", options.tokenizer), ("--data-column", options.data_column)) if value is not None]
    if is_dataset(options.data):  # read and tokenised once the strategy is priced (hpdsl/torch/hf_data.py)
        refusal = dataset_refusal(options.data)
        return [refusal] if refusal else []
    from hpdsl.torch.data import data_refusal

    problems = [f"{flag} reads a Hugging Face dataset, not the token file {options.data}"
                for flag, value in (("--tokenizer", options.tokenizer), ("--data-column", options.data_column))
                if value is not None]
    problem = data_refusal(options.data, options.data_dtype)
    return problems + ([problem] if problem else [])
