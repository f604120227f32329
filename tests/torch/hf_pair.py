"""One helper the logits tests share: a config built by hpdsl and by transformers, holding the same weights.

hpdsl imports the config (hpdsl.importers.hf) and builds it (hpdsl.torch.build_model);
transformers builds it with random weights, which hpdsl.torch.weights.load_hf_state_dict
copies into hpdsl's model under the profile's `weight` rules (profiles/*.hpf).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import transformers

from hpdsl.api import compile_paths, compile_sources
from hpdsl.diagnostics import Source
from hpdsl.importers.hf import import_hf_config
from hpdsl.registry import Registry
from hpdsl.torch import build_model
from hpdsl.torch.model import materialize
from hpdsl.torch.weights import load_hf_state_dict

ROOT = Path(__file__).resolve().parents[2]


def transformers_model(config: dict[str, Any], *, seed: int = 0, jitter: float = 0.0) -> Any:
    """Return transformers' causal LM of `config` in float32 eval mode (eager attention), random weights.

    `jitter` moves the norms, biases and score corrections off their initial values
    (ones, zeros), so that a wrong name map or a misread one shows in the logits.
    """
    torch.manual_seed(seed)
    hf_config = transformers.AutoConfig.for_model(**config)
    hf_config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(hf_config).float().eval()
    if jitter:
        with torch.no_grad():
            for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
                if tensor.is_floating_point() and any(w in name for w in ("norm", "bias", "correction")):
                    tensor.add_(torch.randn_like(tensor) * jitter)
    return model


def hf_pair(config: dict[str, Any], *, seed: int = 0, jitter: float = 0.0,
            stdlib: Registry | None = None) -> tuple[Any, Any, Registry]:
    """Return (hpdsl's model, transformers' model, hpdsl's registry) of `config`, transformers' weights in both."""
    stdlib = stdlib or compile_paths([ROOT / "profiles", ROOT / "families"])
    imported = import_hf_config(config, profiles=stdlib.profiles, name="scaled")
    registry = compile_sources([Source("scaled.hpf", imported.text)])
    ours = materialize(build_model(registry.models["scaled"], registry=registry, device="meta"), "cpu", seed=seed)
    theirs = transformers_model(config, seed=seed, jitter=jitter)
    profile = registry.profile(registry.models["scaled"].profile)
    load_hf_state_dict(ours, theirs.state_dict(), profile, str(config["model_type"]), registry.profiles,
                       model_ir=registry.models["scaled"])
    return ours.eval(), theirs, registry
