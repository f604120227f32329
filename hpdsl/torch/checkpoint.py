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

Rank 0 also writes DIR/step-N/hpdsl-run.json: the model, its `--set` overrides
and the strategy's fields that shape the saved state or the data position
(`RUN_FIELDS`). `hpdsl train --resume` reads it before launching and refuses a
save written for another model or strategy, naming both (`refusal`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
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
RUN = "hpdsl-run.json"
"""What a save was written for: the model, its overrides and the strategy's `RUN_FIELDS`."""
RUN_FIELDS = ("dp", "tp", "pp", "vpp", "cp", "ep", "etp", "zero", "precision", "pp_split", "micro_batch",
              "global_batch", "seq_len")
"""The strategy's fields a save depends on: the mesh and shards it holds, the weights' width, the batches read."""


def run_record(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return what a save records of the worker config `config`: model, overrides, the strategy's RUN_FIELDS."""
    strategy = config["strategy"]
    return {"model": config["model"], "sets": dict(config.get("sets") or {}),
            "strategy": {name: strategy.get(name) for name in RUN_FIELDS}}


def refusal(root: str, config: Mapping[str, Any]) -> str | None:
    """Return why the newest save under `root` cannot be resumed by the job `config` describes (None: it can)."""
    where = newest(root)
    if where is None:
        return None  # the worker says there is nothing to resume
    try:
        saved = json.loads((where / RUN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return (f"--resume: {where} has no readable {RUN} (saved by an older hpdsl?), so what it was written for "
                "is unknown; start a new --checkpoint folder")
    wanted = json.loads(json.dumps(run_record(config)))  # tuples as JSON lists, as saved
    if saved == wanted:
        return None
    differs = [f"{key} {saved.get(key)!r} saved, {wanted[key]!r} now" for key in ("model", "sets")
               if saved.get(key) != wanted[key]]
    old = saved.get("strategy") or {}
    differs += [f"{key} {old.get(key)} saved, {value} now" for key, value in wanted["strategy"].items()
                if old.get(key) != value]
    return (f"--resume: {where} was saved for {_describe(saved)}, but this run is {_describe(wanted)} "
            f"({'; '.join(differs)}); resume with the saved model and strategy, or start a new --checkpoint folder")


def _describe(record: Mapping[str, Any]) -> str:
    """Return a record's model, overrides and strategy as one readable phrase."""
    sets = ",".join(f"{k}={v}" for k, v in sorted((record.get("sets") or {}).items()))
    strategy = " ".join(f"{k} {v}" for k, v in (record.get("strategy") or {}).items() if v is not None)
    return f"model {record.get('model')}" + (f" ({sets})" if sets else "") + f" with {strategy}"


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
         schedule: torch.optim.lr_scheduler.LRScheduler, data: dict[str, Any], names: dict[str, str],
         record: Mapping[str, Any] | None = None) -> Path:
    """Save the job after `step` steps to ROOT/step-<step> (every rank calls it; rank 0 adds `record`); return it."""
    model_state, optim_state = _renamed(*get_state_dict(model, optimizer), names)
    where = Path(root) / f"step-{step}"
    state = {"model": model_state, "optim": optim_state,
             "train": {"step": step, "schedule": schedule.state_dict(), "data": data}}
    dcp.save(state, checkpoint_id=str(where))
    if record is not None and torch.distributed.get_rank() == 0:
        (where / RUN).write_text(json.dumps(record), encoding="utf-8")
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
