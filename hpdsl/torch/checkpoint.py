"""Checkpoints of `hpdsl train --checkpoint DIR`: torch.distributed.checkpoint, one folder per save.

DIR/step-N holds the model and optimizer (each rank writes its own shards:
`get_state_dict` reads FSDP2's and tp's DTensors as they are, so a save never
gathers a whole tensor), the schedule (LambdaLR's state) and the data position
(the step; hpdsl/torch/data.py reads step k's tokens from k alone). `--resume`
loads the newest complete save into the freshly built job and continues at its
step, so the losses after it are the uninterrupted run's.

Expert-parallel ranks hold different experts under the same name (each its
E/ep, each its etp slice of the width), which DCP would take for copies of one
tensor and save once: their keys get the rank's ep and etp coordinates
(`experts.gate_up_proj@ep1.etp0`), so every rank's experts are saved and loaded back.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from hpdsl.torch.modules import GroupedExperts

_SAVE = re.compile(r"^step-(\d+)$")
_DONE = ".metadata"
"""The file DCP writes last: a folder without it is an interrupted save."""


def newest(root: str) -> Path | None:
    """Return the newest complete save under `root` (None: there is none)."""
    saves = [(int(m.group(1)), path) for path in Path(root).glob("step-*")
             if (m := _SAVE.match(path.name)) and (path / _DONE).is_file()]
    return max(saves)[1] if saves else None


def expert_names(model: nn.Module, coords: dict[str, int], split: bool) -> dict[str, str]:
    """Return each routed-expert parameter's name → its checkpoint key on this rank (empty unless `split`: ep·etp > 1)."""
    if not split:
        return {}
    tag = f"@ep{coords.get('ep', 0)}.etp{coords.get('etp', 0)}"
    return {f"{path}.{name}": f"{path}.{name}{tag}" for path, module in model.named_modules()
            if isinstance(module, GroupedExperts) for name, _ in module.named_parameters(recurse=False)}


def _renamed(model_state: dict[str, Any], optim_state: dict[str, Any], names: dict[str, str]
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return both state dicts with the parameters' keys renamed by `names` (a name not in it kept)."""
    model_state = {names.get(k, k): v for k, v in model_state.items()}
    optim_state = {**optim_state, "state": {names.get(k, k): v for k, v in optim_state.get("state", {}).items()},
                   "param_groups": [{**g, "params": [names.get(k, k) for k in g["params"]]}
                                    for g in optim_state.get("param_groups", [])]}
    return model_state, optim_state


def save(root: str, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
         schedule: torch.optim.lr_scheduler.LRScheduler, data: dict[str, Any], names: dict[str, str]) -> Path:
    """Save the job after `step` steps to ROOT/step-<step> (every rank calls it); return the folder."""
    model_state, optim_state = _renamed(*get_state_dict(model, optimizer), names)
    where = Path(root) / f"step-{step}"
    state = {"model": model_state, "optim": optim_state,
             "train": {"step": step, "schedule": schedule.state_dict(), "data": data}}
    dcp.save(state, checkpoint_id=str(where))
    return where


def load(where: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
         schedule: torch.optim.lr_scheduler.LRScheduler, names: dict[str, str]) -> dict[str, Any]:
    """Load a save into the job (every rank calls it); return its train state (step, schedule, data)."""
    model_state, optim_state = _renamed(*get_state_dict(model, optimizer), names)
    state = {"model": model_state, "optim": optim_state,
             "train": {"step": 0, "schedule": schedule.state_dict(), "data": {}}}
    dcp.load(state, checkpoint_id=str(where))
    back = {key: name for name, key in names.items()}
    model_state, optim_state = _renamed(state["model"], state["optim"], back)
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state)
    schedule.load_state_dict(state["train"]["schedule"])
    return dict(state["train"])
