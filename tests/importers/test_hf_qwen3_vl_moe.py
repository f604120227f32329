"""Qwen3-VL-MoE (profiles/qwen.hpf) through the real CLI, held to transformers' count on the meta device.

No published Qwen3-VL-MoE config.json is in the search index byte for byte (ai-dynamo/aiconfigurator's
Qwen3-VL-30B-A3B and 235B-A22B copies are re-writes: lists on one line, no transformers_version;
tests/data/hf/SOURCES.md), so each config here is transformers' own: Qwen3VLMoeConfig's defaults as
`to_dict()` writes them (a text_config of model_type qwen3_vl_moe_text: 24 layers, hidden 2048, 60
experts of 1408, top 4, a vision tower the estimate does not price), with the stated text changes.
transformers builds the model from the same mapping (bench/hf_counts.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from hf_counts import hf_counts  # noqa: E402  (bench/hf_counts.py: transformers' count on the meta device)
from tests.importers.cli_import import estimate_config  # noqa: E402


def _config(**text: Any) -> dict[str, Any]:
    """Return Qwen3VLMoeConfig(text_config=text).to_dict(): the config class's own keys and defaults."""
    config = transformers.Qwen3VLMoeConfig(text_config=text or None).to_dict()
    return {**config, "architectures": ["Qwen3VLMoeForConditionalGeneration"]}


@pytest.mark.parametrize("text", [
    {},                                                                   # the class's 24 layers, 60 experts
    {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
     "head_dim": 64, "num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
     "vocab_size": 1024},                                                 # scaled down
])
def test_the_count_is_transformers(text: dict[str, Any], tmp_path: Path) -> None:
    config = _config(**text)
    params, written = estimate_config(config, tmp_path, "qwen3_vl_moe")
    total, active = hf_counts(config, "vl")
    assert (params["total"], params["active"]) == (total, active)
    assert "composite config" in written  # priced as its language model, saying so (atop the .hpf)
