"""LFM2's keys (hpdsl/importers/hf_conv.py) through the real CLI: Lfm2MLP's width and the short convolution.

Each config is the published LFM2.5-VL-1.6B file (tests/data/hf/lfm2_5_vl_1_6b.json, LiquidAI/
LFM2.5-VL-1.6B's config.json; tests/data/hf/SOURCES.md) with one visible change to its text_config;
the count is transformers' Lfm2ForCausalLM of that text_config on the meta device.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.importers.hf_configs import published


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _write(tmp_path: Path, **text: Any) -> dict[str, Any]:
    config = published("lfm2_5_vl_1_6b")
    config["text_config"] = {**config["text_config"], **text}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return config


def _transformers_total(config: dict[str, Any]) -> int:
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    text = {k: v for k, v in config["text_config"].items() if k not in ("architectures", "model_type")}
    with torch.device("meta"):
        model = transformers.Lfm2ForCausalLM(transformers.Lfm2Config(**text, tie_word_embeddings=True))
    return sum(p.numel() for p in model.parameters())


def _imported_total(tmp_path: Path) -> tuple[int, str]:
    imported = _hpdsl("import-hf", "config.json", "--name", "lfm2", "-o", "lfm2.hpf", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    estimate = _hpdsl("estimate", "lfm2.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    return json.loads(estimate.stdout)["params"]["total"], (tmp_path / "lfm2.hpf").read_text()


@pytest.mark.parametrize("change, width", [
    ({}, 8192),                                                         # ⌊2·12288/3⌋ = 8192, a multiple of 256
    ({"block_auto_adjust_ff_dim": False}, 12288),                       # the stated width, unadjusted
    ({"block_ffn_dim_multiplier": 1.3, "block_multiple_of": 1000}, 11000),  # ⌊1.3·8192⌋ = 10649, up to 11000
    ({"block_ff_dim": 3000, "intermediate_size": 12288}, 2048),          # block_ff_dim wins: ⌊2000⌋ up to 2048
])
def test_the_feed_forward_width_is_transformers(change: dict[str, Any], width: int, tmp_path: Path) -> None:
    config = _write(tmp_path, **change)
    total, text = _imported_total(tmp_path)
    assert f"ffn_width {width}\n" in text
    assert total == _transformers_total(config)


def test_a_biased_short_convolution_is_transformers(tmp_path: Path) -> None:
    config = _write(tmp_path, conv_bias=True, conv_L_cache=4)
    total, text = _imported_total(tmp_path)
    assert "ssm { ssm_state 0  ssm_conv 4  ssm_expand 1  ssm_conv_bias true }" in text
    assert total == _transformers_total(config) == 1_170_340_608 + 10 * (2048 * 5 + 2048)


@pytest.mark.parametrize("change, key", [
    ({"block_ffn_dim_multiplier": "wide"}, "block_ffn_dim_multiplier"),
    ({"block_ffn_dim_multiplier": -1.0}, "block_ffn_dim_multiplier"),
    ({"block_multiple_of": 0}, "block_multiple_of"),
    ({"conv_L_cache": 0}, "conv_L_cache"),
    ({"conv_bias": "yes"}, "conv_bias"),
    ({"block_auto_adjust_ff_dim": 2}, "block_auto_adjust_ff_dim"),
])
def test_a_bad_value_is_refused_naming_its_key(change: dict[str, Any], key: str, tmp_path: Path) -> None:
    _write(tmp_path, **change)
    refused = _hpdsl("import-hf", "config.json", "-o", "lfm2.hpf", cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith("hpdsl: ") and key in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "lfm2.hpf").exists()


def test_full_attn_idxs_place_the_attention_layers_when_layer_types_is_absent(tmp_path: Path) -> None:
    """Lfm2Config: without layer_types, attention at full_attn_idxs and short convolutions elsewhere."""
    config = published("lfm2_5_vl_1_6b")
    text = {k: v for k, v in config["text_config"].items() if k != "layer_types"}
    config["text_config"] = {**text, "full_attn_idxs": [2, 5, 8, 10, 12, 14]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    total, imported = _imported_total(tmp_path)
    assert "stack [[conv * 2, full_attention] * 3, conv, full_attention, conv, full_attention, conv, " \
           "full_attention, conv]" in imported
    assert total == _transformers_total(config) == 1_170_340_608  # the published layer_types' count
