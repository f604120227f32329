"""Qwen2-VL and Qwen2.5-VL (profiles/qwen.hpf) through `hpdsl import-hf`: a flat composite config with M-RoPE.

The file is tests/data/hf/qwen2_5_vl_7b_instruct.json (Qwen/Qwen2.5-VL-7B-Instruct's published
config; tests/data/hf/SOURCES.md gives its source): the language model's keys at the top level
beside vision_config, and `rope_scaling: {"type": "mrope", ...}`, which the qwen profile's map
translates to rope_type "default" (`{ "mrope" -> "default" }`), as Qwen2_5_VLConfig does. Each count
is transformers' of the same config on the meta device (bench/hf_counts.py); the variants are the
file with the stated keys changed.
"""

from __future__ import annotations

from pathlib import Path

from tests.importers.cli_import import estimate_config, import_config
from tests.importers.hf_configs import published, transformers_total

SMALL = {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
         "intermediate_size": 512, "vocab_size": 512}


def test_the_published_file_imports_as_its_language_model_saying_so(tmp_path: Path) -> None:
    imported = import_config(published("qwen2_5_vl_7b_instruct"), tmp_path, "qwen25vl")
    assert imported.returncode == 0, imported.stderr
    assert "qwen2_5_vl is a composite config" in imported.stderr and "vision_config" in imported.stderr
    text = (tmp_path / "qwen25vl.hpf").read_text()
    assert text.startswith("// hpdsl import-hf: qwen2_5_vl is a composite config")
    for line in ('rope_type "default"', "rope_theta 1000000.0", "qkv_bias true", "o_bias false",
                 "tie_embeddings false"):
        assert f"  {line}\n" in text, (line, text)


def test_qwen2_vl_the_same_language_model_is_exact(tmp_path: Path) -> None:
    """Qwen2VLForConditionalGeneration builds the same Qwen2 language model (the file's model_type changed)."""
    config = {**published("qwen2_5_vl_7b_instruct"), **SMALL, "model_type": "qwen2_vl",
              "architectures": ["Qwen2VLForConditionalGeneration"]}
    params, text = estimate_config(config, tmp_path, "qwen2vl")
    assert '  rope_type "default"\n' in text
    assert params["total"] == transformers_total(config, "vl")


def test_a_rope_scaling_type_neither_the_table_nor_hpdsl_names_is_refused(tmp_path: Path) -> None:
    config = {**published("qwen2_5_vl_7b_instruct"), "rope_scaling": {"type": "spiral", "mrope_section": [16, 24, 24]}}
    refused = import_config(config, tmp_path, "spiral")
    assert refused.returncode == 1, refused.stderr
    assert "rope_scaling.type is 'spiral'; rope_type is one of" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "spiral.hpf").exists()


def test_mrope_is_default_only_where_the_qwen_vl_config_class_says_so(tmp_path: Path) -> None:
    """The translation is the Qwen-VL profile's: another model_type's "mrope" is no rope_type hpdsl builds."""
    config = {**published("llama_3_2_1b_instruct"), "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    refused = import_config(config, tmp_path, "llama_mrope")
    assert refused.returncode == 1 and "'mrope'" in refused.stderr, refused.stderr
