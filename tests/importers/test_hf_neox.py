"""GPT-NeoX (gpt_neox) through `hpdsl import-hf`: profiles/neox.hpf's wiring, rotary share and biases.

The file is tests/data/hf/gpt_neox_20b.json (EleutherAI/gpt-neox-20b's published config;
tests/data/hf/SOURCES.md gives its source), which states the older GPTNeoXConfig names
(rotary_pct, rotary_emb_base, two dropout rates). Each count is transformers' of the same config
on the meta device (bench/hf_counts.py); the variants are the file made by shrunk's stated keys.
"""

from __future__ import annotations

from pathlib import Path

from tests.importers.cli_import import estimate_config, import_config
from tests.importers.hf_configs import published, shrunk, transformers_total

SMALL = {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8, "intermediate_size": 1024,
         "vocab_size": 512}
"""GPT-NeoX-20B cut to a size transformers builds in a moment (its every other key as published)."""


def test_gpt_neox_20b_imports_its_wiring_rotary_share_and_biases(tmp_path: Path) -> None:
    params, text = estimate_config(published("gpt_neox_20b"), tmp_path, "neox20b")
    assert text.startswith("model neox20b : neox {")  # profiles/neox.hpf: parallel_two_norms
    for line in ("rotary_fraction 0.25", "qkv_bias true", "o_bias true", "mlp_bias true", "norm_bias true",
                 "tie_embeddings false", "mlp plain", "norm layernorm", "activation gelu_tanh"):
        assert f"  {line}\n" in text, (line, text)
    assert params["total"] == 20_554_567_680  # GPTNeoXForCausalLM of the file on the meta device


def test_unbiased_attention_and_another_rotary_share_are_exact(tmp_path: Path) -> None:
    config = shrunk("gpt_neox_20b", attention_bias=False, rotary_pct=0.5, **SMALL)
    params, text = estimate_config(config, tmp_path, "neox_small")
    assert "  qkv_bias false\n" in text and "  o_bias false\n" in text and "  rotary_fraction 0.5\n" in text
    assert params["total"] == transformers_total(config)


def test_a_config_leaving_rotary_pct_out_takes_gptneoxconfigs_share(tmp_path: Path) -> None:
    params, text = estimate_config(shrunk("gpt_neox_20b", drop=("rotary_pct",), **SMALL), tmp_path, "neox_default")
    assert "  rotary_fraction 0.25\n" in text
    assert params["total"] == transformers_total(shrunk("gpt_neox_20b", drop=("rotary_pct",), **SMALL))


def test_the_sequential_residual_imports_as_pre_norm_and_is_exact(tmp_path: Path) -> None:
    """use_parallel_residual false is GPTNeoXLayer's pre-norm stack: the map's table reads it as wiring pre_norm."""
    config = shrunk("gpt_neox_20b", use_parallel_residual=False, **SMALL)
    params, text = estimate_config(config, tmp_path, "neox_seq")
    assert "  wiring pre_norm\n" in text, text
    assert params["total"] == transformers_total(config)


def test_a_residual_flag_the_table_does_not_name_is_refused_by_its_key(tmp_path: Path) -> None:
    refused = import_config(shrunk("gpt_neox_20b", use_parallel_residual="yes", **SMALL), tmp_path, "neox_bad")
    assert refused.returncode == 1, refused.stderr
    assert "use_parallel_residual is 'yes'; wiring is one of" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "neox_bad.hpf").exists()


def test_key_value_heads_and_head_dim_are_not_read(tmp_path: Path) -> None:
    """GPTNeoXAttention builds q, k and v of hidden / heads per head whatever num_key_value_heads and head_dim say."""
    config = shrunk("gpt_neox_20b", num_key_value_heads=2, head_dim=8, **SMALL)
    params, text = estimate_config(config, tmp_path, "neox_kv")
    assert "kv_heads" not in text and "head_dim" not in text, text
    assert params["total"] == transformers_total(config)
