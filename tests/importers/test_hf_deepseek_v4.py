"""DeepSeek-V4 imports as profiles/deepseek_v4.hpf's kinds and fields, with transformers' parameter count.

The published DeepSeek-V4-Flash config (tests/data/hf/deepseek_v4_flash.json, its source in
tests/data/hf/SOURCES.md) imports exact (tests/importers/test_published_architectures.py holds it to
tests/data/hf/counts.json); here its layers' kinds, a small form of it (shrunk, the changed keys
stated) held to transformers' DeepseekV4ForCausalLM counted on the meta device, and transformers 5's
layer_types / mlp_layer_types form of the same layers.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.importers.cli_import import built_total, estimate_config, import_config
from tests.importers.hf_configs import shrunk

SMALL = {"hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4, "head_dim": 32,
         "qk_rope_head_dim": 8, "q_lora_rank": 24, "o_groups": 2, "o_lora_rank": 16, "index_n_heads": 4,
         "index_head_dim": 16, "index_topk": 4, "n_routed_experts": 8, "num_experts_per_tok": 2,
         "moe_intermediate_size": 32, "vocab_size": 512}
"""Small dims for the published file (shrunk): six layers (the file's first six compress_ratios, 0 0 4 128 4 128;
its first three hash-routed), every construct kept."""


def test_the_published_file_s_layers_are_its_compressors_and_routers(tmp_path: Path) -> None:
    """compress_ratios: 0 sliding, 4 CSA, 128 HCA; num_hash_layers: the first three hash-routed."""
    imported = import_config(shrunk("deepseek_v4_flash"), tmp_path, "v4")
    assert imported.returncode == 0, imported.stderr
    text = (tmp_path / "v4.hpf").read_text(encoding="utf-8")
    assert "stack [sliding_attention_hash_moe * 2, compressed_sparse_attention_hash_moe, " \
           "[heavily_compressed_attention_moe, compressed_sparse_attention_moe] * 20]" in text
    assert "hc_mult 4" in text and "o_groups 8" in text and "query_rank 1024" in text and "mtp" not in text


@pytest.mark.parametrize("changes", [{}, SMALL], ids=["flash", "small"])
def test_it_imports_with_transformers_count(changes: dict[str, Any], tmp_path: Path) -> None:
    """params.total and params.active are transformers' count on the meta device, build_model's total the same."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from hf_counts import hf_counts  # bench/hf_counts.py: transformers' count on the meta device

    config = shrunk("deepseek_v4_flash", **changes)
    params, _ = estimate_config(config, tmp_path, "v4")
    total, active = hf_counts(config, "causal")
    assert (params["total"], params["active"]) == (total, active)
    assert built_total(tmp_path / "v4.hpf", "v4") == total


def test_transformers_5_s_layer_lists_give_the_same_layers(tmp_path: Path) -> None:
    """layer_types and mlp_layer_types (DeepseekV4Config's own fields) place the same kinds as the legacy keys."""
    legacy = shrunk("deepseek_v4_flash", **SMALL)
    types = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
    listed = shrunk("deepseek_v4_flash", drop=("compress_ratios", "num_hash_layers"), **SMALL,
                    layer_types=[types[r] for r in legacy["compress_ratios"][:6]],
                    mlp_layer_types=["hash_moe"] * 3 + ["moe"] * 3)
    first, _ = estimate_config(legacy, tmp_path, "legacy")
    second, _ = estimate_config(listed, tmp_path, "listed")
    assert first == second
    stacks = [line for name in ("legacy", "listed") for line in (tmp_path / f"{name}.hpf").read_text().splitlines()
              if "stack" in line]
    assert stacks[0] == stacks[1]


def test_a_compress_ratio_transformers_does_not_read_is_refused_naming_the_key(tmp_path: Path) -> None:
    """DeepseekV4Config maps 0, 4 and 128 to layer types; any other ratio is refused, the key named."""
    refused = import_config(shrunk("deepseek_v4_flash", **SMALL, compress_ratios=[0, 0, 4, 64, 4, 128]), tmp_path,
                            "v4")
    assert refused.returncode == 1 and "compress_ratios" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.parametrize(("statement", "words"), [
    ("mtp 1", "an MTP layer reads and writes one hidden-wide stream"),
    ("wiring sandwich", "hyper-connections are pre_norm"),
], ids=["mtp", "wiring"])
def test_what_the_streams_have_no_place_for_is_an_outer_wiring_diagnostic(statement: str, words: str,
                                                                          tmp_path: Path) -> None:
    """hc_mult's residual streams: an MTP layer (one stream) or a wiring other than pre_norm is refused, located."""
    from hpdsl.api import check_sources
    from hpdsl.diagnostics import Source

    imported = import_config(shrunk("deepseek_v4_flash", **SMALL), tmp_path, "v4")
    assert imported.returncode == 0, imported.stderr
    text = (tmp_path / "v4.hpf").read_text(encoding="utf-8").replace("  hc_mult 4", f"  hc_mult 4\n  {statement}")
    checked = check_sources([Source("v4.hpf", text)], stdlib=True)
    assert "outer-wiring" in [d.code for d in checked.diagnostics if d.severity == "error"], checked.diagnostics
    assert any(words in (d.hint or "") + d.message for d in checked.diagnostics)
