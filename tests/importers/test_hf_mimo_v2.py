"""MiMo-V2-Flash (profiles/mimo_v2.hpf) through the real CLI, held to transformers' count on the meta device.

No published MiMo-V2-Flash config.json is in the search index byte for byte (tests/data/hf/SOURCES.md,
"Not found"), so each config here is transformers' own: MiMoV2FlashConfig's defaults (the released
model's dims: 48 layers, hidden 4096, 64 heads of 192 with values of 128, 4 kv heads, 256 experts of
2048, top 8, a dense first layer of 16384, vocab 152576) as `to_dict()` writes them (its layer_types
and mlp_layer_types), with the stated changes. The hub's spelling of the same layers
(hybrid_layer_pattern, moe_layer_freq and the swa_* keys, which MiMoV2FlashConfig does not read) is
HUB_KEYS, its values the release's rule. transformers builds the model from the same mapping
(bench/hf_counts.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from hf_counts import hf_counts  # noqa: E402  (bench/hf_counts.py: transformers' count on the meta device)
from tests.importers.cli_import import estimate_config, import_config  # noqa: E402


def _config(**changes: Any) -> dict[str, Any]:
    """Return MiMoV2FlashConfig(**changes).to_dict(): the config class's own layer lists and defaults."""
    return {**transformers.MiMoV2FlashConfig(**changes).to_dict(), "architectures": ["MiMoV2FlashForCausalLM"]}


def _hub(layers: int) -> dict[str, Any]:
    """Return the hub's keys for `layers` layers: full attention at 0 and every sixth, a dense first layer."""
    return {"hybrid_layer_pattern": [0 if i == 0 or (i + 1) % 6 == 0 else 1 for i in range(layers)],
            "moe_layer_freq": [0] + [1] * (layers - 1), "swa_num_attention_heads": 64,
            "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128,
            "add_swa_attention_sink_bias": True, "add_full_attention_sink_bias": False,
            "sliding_window_size": 128, "swa_rope_theta": 10000, "layernorm_epsilon": 1e-05,
            "attention_value_scale": 0.707, "n_shared_experts": None, "hybrid_block_size": None}


def _import(config: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return import_config(config, tmp_path, "mimo")


def _estimate(config: dict[str, Any], tmp_path: Path) -> tuple[dict[str, Any], str]:
    return estimate_config(config, tmp_path, "mimo")


@pytest.mark.parametrize("changes", [
    {"num_hidden_layers": 7},                                         # full, 4 sliding, full, sliding
    {},                                                               # the released 48 layers
    {"num_hidden_layers": 4, "num_key_value_heads": 2, "head_dim": 96, "v_head_dim": 32,
     "n_routed_experts": 8, "num_experts_per_tok": 2, "tie_word_embeddings": True},
])
def test_the_count_is_transformers(changes: dict[str, Any], tmp_path: Path) -> None:
    config = _config(**changes)
    params, text = _estimate(config, tmp_path)
    assert (params["total"], params["active"]) == hf_counts(config, "causal")
    assert f"value_dim {config['v_head_dim']}\n" in text


def test_the_sliding_layers_have_their_own_head_shapes(tmp_path: Path) -> None:
    """A sliding layer's attention: twice the kv heads (k and v) and one sink per query head."""
    params, _ = _estimate(_config(num_hidden_layers=7), tmp_path)
    full = params["per_kind"]["full_attention_moe"]["attention"]
    sliding = params["per_kind"]["sliding_attention_moe"]["attention"]
    kv = 4 * 4096 * (192 + 128)  # another 4 kv heads: their keys and values
    assert sliding - full == kv + 64


def test_the_hub_spelling_of_the_layers_imports_alike(tmp_path: Path) -> None:
    """hybrid_layer_pattern and moe_layer_freq state the layers MiMoV2FlashConfig's defaults build."""
    config = _config(num_hidden_layers=12)
    expected, text = _estimate(config, tmp_path)
    hub = {k: v for k, v in config.items() if k not in ("layer_types", "mlp_layer_types")} | _hub(12)
    found, hub_text = _estimate(hub, tmp_path)
    assert found["total"] == expected["total"] == hf_counts(hub, "causal")[0]
    assert hub_text.split("stack")[1] == text.split("stack")[1]


@pytest.mark.parametrize(("changes", "key"), [
    ({"add_full_attention_sink_bias": True}, "add_full_attention_sink_bias"),  # not what transformers builds
    ({"hybrid_layer_pattern": [0, 2, 1, 1]}, "hybrid_layer_pattern"),
    ({"moe_layer_freq": [0, 1]}, "moe_layer_freq"),                           # fewer entries than layers
])
def test_what_the_profile_cannot_price_is_refused_by_name(changes: dict[str, Any], key: str,
                                                          tmp_path: Path) -> None:
    config = {k: v for k, v in _config(num_hidden_layers=4).items() if k not in ("layer_types", "mlp_layer_types")}
    imported = _import({**config, **_hub(4), **changes}, tmp_path)
    assert imported.returncode == 1, imported.stderr
    assert key in imported.stderr and "Traceback" not in imported.stderr


@pytest.mark.parametrize("drop", [False, True])
def test_the_rotary_bases_are_rope_parameters_whatever_the_top_level_keys_say(drop: bool, tmp_path: Path) -> None:
    """MiMoV2FlashConfig reads neither rope_theta nor swa_rope_theta; absent rope_parameters, its defaults hold."""
    config = {**_config(num_hidden_layers=7), **_hub(7), "rope_theta": 1234.0, "swa_rope_theta": 99.0}
    if drop:
        config.pop("rope_parameters")
    theirs = transformers.MiMoV2FlashConfig(**config).rope_parameters
    imported = _import(config, tmp_path)
    assert imported.returncode == 0, imported.stderr
    text = (tmp_path / "mimo.hpf").read_text()
    assert f"  rope_theta {theirs['full_attention']['rope_theta']:.1f}\n" in text, text
    assert f"  local_rope_theta {theirs['sliding_attention']['rope_theta']:.1f}\n" in text, text
