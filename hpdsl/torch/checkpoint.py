"""Checkpoints of `hpdsl train --checkpoint DIR`: torch.distributed.checkpoint, one folder per save.

DIR/step-N holds the model and optimizer (each rank writes its own shards:
`get_state_dict` reads FSDP2's and tp's DTensors as they are, so a save never
gathers a whole tensor), the schedule (LambdaLR's state) and the data position
(the step; hpdsl/torch/data.py reads step k's tokens from k alone). `--resume`
loads the newest complete save into the freshly built job and continues at its
step, so the losses after it are the uninterrupted run's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

_SAVE = re.compile(r"^step-(\d+)$")
_DONE = ".metadata"
"""The file DCP writes last: a folder without it is an interrupted save."""


def newest(root: str) -> Path | None:
    """Return the newest complete save under `root` (None: there is none)."""
    saves = [(int(m.group(1)), path) for path in Path(root).glob("step-*")
             if (m := _SAVE.match(path.name)) and (path / _DONE).is_file()]
    return max(saves)[1] if saves else None


def save(root: str, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
         schedule: torch.optim.lr_scheduler.LRScheduler, data: dict[str, Any]) -> Path:
    """Save the job after `step` steps to ROOT/step-<step> (every rank calls it); return the folder."""
    model_state, optim_state = get_state_dict(model, optimizer)
    where = Path(root) / f"step-{step}"
    state = {"model": model_state, "optim": optim_state,
             "train": {"step": step, "schedule": schedule.state_dict(), "data": data}}
    dcp.save(state, checkpoint_id=str(where))
    return where


def load(where: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
         schedule: torch.optim.lr_scheduler.LRScheduler) -> dict[str, Any]:
    """Load a save into the job (every rank calls it); return its train state (step, schedule, data)."""
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state,
             "train": {"step": 0, "schedule": schedule.state_dict(), "data": {}}}
    dcp.load(state, checkpoint_id=str(where))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    schedule.load_state_dict(state["train"]["schedule"])
    return dict(state["train"])
