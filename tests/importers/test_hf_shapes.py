"""Per-layer head shapes a config lists (hpdsl/importers/hf_shapes.py), and Llama 4's layer keys, held by the real CLI.

Laguna's num_attention_heads_per_layer and Gemma 4's per_layer_config (transformers 5.24's form) become
the fields the kinds' dims read; a list that gives one kind two shapes, a sliding layer another shape or
a malformed entry is refused naming the key (exit 1, no traceback). Llama 4's no_rope_layers,
no_rope_layer_interval, interleave_moe_layer_step and moe_layers are refused when they describe no model
transformers builds. The configs are the published files (tests/data/hf/), with the change each test states.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.importers.cli_import import import_config
from tests.importers.hf_configs import published

LAGUNA_HEADS = [48 if i % 4 == 0 else 64 for i in range(40)]
"""Laguna-XS.2's published num_attention_heads_per_layer: 48 on the full layers, 64 on the sliding ones."""


def _refused(config: dict[str, Any], tmp_path: Path, *words: str) -> None:
    run = import_config(config, tmp_path, "m")
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr and all(w in run.stderr for w in words), run.stderr


def _laguna(**change: Any) -> dict[str, Any]:
    return {**published("laguna_xs_2_fp8"), **change}


def _llama4(**change: Any) -> dict[str, Any]:
    config = published("llama_4_scout_17b_16e_instruct")
    config["text_config"].update(change)
    return config


def test_the_sliding_layers_head_count_becomes_sliding_heads(tmp_path: Path) -> None:
    run = import_config(_laguna(), tmp_path, "m")
    assert run.returncode == 0, run.stderr
    assert "sliding_heads 64" in (tmp_path / "m.hpf").read_text()


@pytest.mark.parametrize(("heads", "words"), [
    (LAGUNA_HEADS[:-1], "lists 39 layers, but num_hidden_layers is 40"),
    ("48", "expected a head count per layer"),
    ([40, *LAGUNA_HEADS[1:]], "gives layers [0] other head counts than num_attention_heads 48"),
    ([*LAGUNA_HEADS[:2], 60, *LAGUNA_HEADS[3:]], "several head counts [60, 64]"),
])
def test_per_layer_head_counts_a_kind_cannot_hold_are_refused(heads: Any, words: str, tmp_path: Path) -> None:
    _refused(_laguna(num_attention_heads_per_layer=heads), tmp_path, "num_attention_heads_per_layer", words)


def _gemma4(table: Any) -> dict[str, Any]:
    config = published("gemma_4_31b_it")
    text = config["text_config"]
    text.update(per_layer_config=table, global_head_dim=None, num_global_key_value_heads=None)
    return config


def _full_layers() -> list[int]:
    return [i for i, kind in enumerate(published("gemma_4_31b_it")["text_config"]["layer_types"])
            if kind == "full_attention"]


def test_a_per_layer_table_sets_the_full_layers_shapes(tmp_path: Path) -> None:
    table = {f"{i:02d}": {"head_dim": 512, "num_key_value_heads": 4} for i in _full_layers()}
    run = import_config(_gemma4(table), tmp_path, "m")
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "m.hpf").read_text()
    assert "global_head_dim 512" in text and "global_kv_heads 4" in text


@pytest.mark.parametrize(("table", "words"), [
    ({"00": {"head_dim": 512}}, "gives the sliding-window layers [0] other shapes"),
    ({"05": {"head_dim": 512}, "11": {"head_dim": 256}}, "several shapes"),
    ({"05": {"sliding_window": 8}}, "sets sliding_window per layer"),
    ({"x": {"head_dim": 512}}, "expected a table of layer numbers"),
    ([512], "expected a table of layer numbers"),
])
def test_a_per_layer_table_a_kind_cannot_hold_is_refused(table: Any, words: str, tmp_path: Path) -> None:
    _refused(_gemma4(table), tmp_path, "per_layer_config", words)


@pytest.mark.parametrize(("change", "words"), [
    ({"no_rope_layers": "1110"}, "no_rope_layers is '1110'; expected a list of 1 (rotary) or 0"),
    ({"no_rope_layers": [1, 1, 1, 0]}, "no_rope_layers lists 4 layers, but num_hidden_layers is 48"),
    ({"no_rope_layers": [2] * 48}, "no_rope_layers holds 2"),
    ({"no_rope_layer_interval": 0}, "no_rope_layer_interval is 0; expected a period of at least 1 layer"),
    ({"interleave_moe_layer_step": 0}, "interleave_moe_layer_step is 0; expected a period of at least 1 layer"),
    ({"moe_layers": "1,3"}, "moe_layers is '1,3'; expected a list of layer numbers"),
    ({"moe_layers": [1, 48]}, "moe_layers names layers [48], outside the model's 48"),
    ({"attn_temperature_tuning": False}, "no-position layers without their query temperature"),
])
def test_llama4_layer_keys_that_make_no_model_are_refused(change: dict[str, Any], words: str, tmp_path: Path) -> None:
    _refused(_llama4(**change), tmp_path, words)


def test_llama4_moe_layers_place_the_experts(tmp_path: Path) -> None:
    run = import_config(_llama4(moe_layers=list(range(1, 48, 2))), tmp_path, "m")
    assert run.returncode == 0, run.stderr
    assert "rope_attention_dense, rope_attention_moe" in (tmp_path / "m.hpf").read_text()
