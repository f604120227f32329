"""GPT-2's learned absolute positions: the built model turns no rotary embedding, and computes transformers' logits.

GPT-2 (profiles/gpt2.hpf) adds a learned position table to the token embeddings
and nothing else: its attention is position-free. The case is the published
gpt2-large config.json (tests/data/hf/gpt2_large.json, tests/data/hf/SOURCES.md)
at small dims. Its fused c_attn Conv1D (q, k and v side by side, stored
transposed) has no weight rule (hpdsl/torch/weights.py maps names one to one), so
the copy below splits it by hand.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hpdsl.api import compile_paths, compile_sources  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.model import materialize  # noqa: E402
from tests.importers.hf_configs import published  # noqa: E402
from tests.torch.hf_pair import ROOT, transformers_model  # noqa: E402

SMALL = {"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 101, "n_positions": 64, "n_ctx": 64,
         "bos_token_id": None, "eos_token_id": None, "layer_norm_epsilon": 1e-6}
"""The dims the scaled copy takes; the norms' epsilon is hpdsl's one (1e-6: the config's is not built, as in
tests/torch/test_hf_logits.py)."""


def _copy(ours: Any, theirs: Any, layers: int, hidden: int) -> None:
    state = theirs.state_dict()
    target = {"embed.weight": state["transformer.wte.weight"], "positions.weight": state["transformer.wpe.weight"],
              "norm.weight": state["transformer.ln_f.weight"], "norm.bias": state["transformer.ln_f.bias"]}
    for i in range(layers):
        hf, mine = f"transformer.h.{i}.", f"layers.{i}."
        for part, (weight, bias) in zip("qkv", zip(state[hf + "attn.c_attn.weight"].split(hidden, dim=1),
                                                   state[hf + "attn.c_attn.bias"].split(hidden))):
            target[f"{mine}mixer.{part}_proj.weight"], target[f"{mine}mixer.{part}_proj.bias"] = weight.t(), bias
        for ours_name, hf_name in (("mixer.o_proj", "attn.c_proj"), ("ffn.up_proj", "mlp.c_fc"),
                                   ("ffn.down_proj", "mlp.c_proj")):
            target[f"{mine}{ours_name}.weight"] = state[f"{hf}{hf_name}.weight"].t()
            target[f"{mine}{ours_name}.bias"] = state[f"{hf}{hf_name}.bias"]
        for ours_name, hf_name in (("mixer_norm", "ln_1"), ("ffn_norm", "ln_2")):
            for tensor in ("weight", "bias"):
                target[f"{mine}{ours_name}.{tensor}"] = state[f"{hf}{hf_name}.{tensor}"]
    assert set(target) == {name for name, _ in ours.named_parameters()}
    with torch.no_grad():
        for name, param in ours.named_parameters():
            param.copy_(target[name])


def test_gpt2_builds_no_rotary_and_gives_transformers_logits() -> None:
    config = {**published("gpt2_large"), **SMALL}
    stdlib = compile_paths([ROOT / "profiles", ROOT / "families"])
    imported = import_hf_config(config, profiles=stdlib.profiles, name="scaled")
    registry = compile_sources([Source("scaled.hpf", imported.text)])
    ours = materialize(build_model(registry.models["scaled"], registry=registry, device="meta"), "cpu", seed=0).eval()
    theirs = transformers_model(config, jitter=0.1)
    _copy(ours, theirs, SMALL["n_layer"], SMALL["n_embd"])
    ids = torch.randint(0, SMALL["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(input_ids=ids, use_cache=False).logits, atol=1e-4, rtol=1e-4)
