"""MiniMax-M2 (profiles/minimax_m2.hpf) through the real CLI, held to transformers' count on the meta device.

Each config here is a published file, nvidia/MiniMax-M2.7-NVFP4's config.json (tests/data/hf/
minimax_m2_7_nvfp4.json, its source in tests/data/hf/SOURCES.md: the released model's dims, 62
layers, hidden 3072, 48 heads, 8 kv heads of 128, 256 experts of 1536, top 8, vocab 200064), with
the changes each test states (`shrunk`; attn_type_list follows the layer count). transformers
builds the model from the same mapping (bench/hf_counts.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from hf_counts import hf_counts  # noqa: E402  (bench/hf_counts.py: transformers' count on the meta device)
from tests.importers.cli_import import estimate_config, import_config  # noqa: E402

from tests.importers.hf_configs import shrunk  # noqa: E402

PUBLISHED = "minimax_m2_7_nvfp4"
"""The published MiniMax-M2 file the configs here start from (tests/importers/hf_configs.py FILES)."""


def _config(**changes: Any) -> dict[str, Any]:
    """Return the published MiniMax-M2.7 config with `changes` set (attn_type_list: one entry a layer)."""
    config = shrunk(PUBLISHED, **changes)
    config["attn_type_list"] = [1] * config["num_hidden_layers"]  # MiniMax-M2: softmax attention everywhere
    return config


def _import(config: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return import_config(config, tmp_path, "m2")


def _estimate(config: dict[str, Any], tmp_path: Path) -> tuple[dict[str, Any], str]:
    return estimate_config(config, tmp_path, "m2")


@pytest.mark.parametrize("changes", [
    {"num_hidden_layers": 2},                                        # two released layers
    {},                                                              # the released 62 layers
    {"num_hidden_layers": 3, "num_local_experts": 16, "num_experts_per_tok": 2, "head_dim": 64,
     "rotary_dim": 16, "tie_word_embeddings": True},                  # smaller experts and heads, tied
])
def test_the_count_is_transformers(changes: dict[str, Any], tmp_path: Path) -> None:
    config = _config(**changes)
    params, text = _estimate(config, tmp_path)
    total, active = hf_counts(config, "causal")
    assert (params["total"], params["active"]) == (total, active)
    assert params["mtp"] == 0  # MiniMaxM2ForCausalLM builds no MTP module, whatever num_mtp_modules says
    assert "qk_norm_full true\n" in text
    # MiniMaxM2Config: a stated partial_rotary_factor beats the legacy rotary_dim / head_dim (a setdefault).
    share = config.get("partial_rotary_factor") or config["rotary_dim"] / config["head_dim"]
    assert f"rotary_fraction {share}\n" in text


def test_the_released_count_is_its_checkpoints_weights(tmp_path: Path) -> None:
    """228,689,748,992: the published file's count, the checkpoint's tensors less scales and routers' bias buffers."""
    params, _ = _estimate(_config(), tmp_path)
    assert params["total"] == 228_689_748_992


@pytest.mark.parametrize(("changes", "key"), [
    ({"qk_norm_type": "per_head"}, "qk_norm_type"),   # a per-head norm is another parameter count
    ({"shared_intermediate_size": 1024}, "shared_intermediate_size"),
    ({"scoring_func": "softmax"}, "scoring_func"),
])
def test_a_value_the_profile_does_not_price_is_refused_by_name(changes: dict[str, Any], key: str,
                                                               tmp_path: Path) -> None:
    imported = _import(_config(num_hidden_layers=2, **changes), tmp_path)
    assert imported.returncode == 1, imported.stderr
    assert key in imported.stderr and "Traceback" not in imported.stderr
