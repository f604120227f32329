"""GLM-4.5/4.7 (glm4_moe) and GLM-4.7-Flash (glm4_moe_lite) through `hpdsl import-hf`: the keys their config classes read.

The files are tests/data/hf/glm_4_5_air.json (zai-org/GLM-4.5-Air's published config) and
glm_4_7_flash.json (ai-dynamo/aiconfigurator's trimmed copy; tests/data/hf/SOURCES.md gives both
sources); profiles/glm4_moe.hpf holds the import rules. Each
count is transformers' of the same config on the meta device (bench/hf_counts.py), the configs
made from a file by shrunk's stated keys.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.importers.hf_configs import shrunk


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _imported(config: dict[str, Any], tmp_path: Path) -> str:
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    done = _hpdsl("import-hf", "config.json", "--name", "glm", "-o", "glm.hpf", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return (tmp_path / "glm.hpf").read_text(encoding="utf-8")


def _params(tmp_path: Path) -> dict[str, Any]:
    estimate = _hpdsl("estimate", "glm.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    return dict(json.loads(estimate.stdout)["params"])


def _transformers_counts(config: dict[str, Any]) -> tuple[int, int | None]:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from hf_counts import hf_counts

    return hf_counts(config, "causal")


def test_glm_4_5_air_imports_its_published_keys(tmp_path: Path) -> None:
    """GLM-4.5-Air's file: q/k/v biased, no QK-norm, half the head rotated, one MTP layer, one dense layer."""
    text = _imported(shrunk("glm_4_5_air"), tmp_path)
    for line in ("first_k_dense 1", "mtp 1", "rotary_fraction 0.5", "qk_norm false", "qkv_bias true",
                 "o_bias false", "moe { experts 128  top_k 8  expert_width 1408  shared_experts 1  router_sigmoid true  router_correction true }"):
        assert line in text, text
    assert "mla" not in text


def test_glm_keys_left_out_take_glm4_moe_config_defaults(tmp_path: Path) -> None:
    """Without its flags the file takes Glm4MoeConfig's defaults: unbiased, half the head rotated, one MTP layer."""
    config = shrunk("glm_4_5_air", drop=("attention_bias", "use_qk_norm", "partial_rotary_factor",
                                          "num_nextn_predict_layers", "first_k_dense_replace"))
    text = _imported(config, tmp_path)
    for line in ("first_k_dense 1", "mtp 1", "rotary_fraction 0.5", "qk_norm false", "qkv_bias false"):
        assert line in text, text
    params = _params(tmp_path)
    assert (params["total"], params["active"]) == _transformers_counts(config)


def test_glm_attention_bias_biases_q_k_and_v_not_the_output(tmp_path: Path) -> None:
    """Glm4MoeAttention's attention_bias: q, k, v biased, o_proj not (the builtin would bias both)."""
    config = shrunk("glm_4_5_air", attention_bias=True, use_qk_norm=True, partial_rotary_factor=0.25)
    text = _imported(config, tmp_path)
    assert "qkv_bias true" in text and "o_bias false" in text and "qk_norm true" in text
    assert "rotary_fraction 0.25" in text
    params = _params(tmp_path)
    assert (params["total"], params["active"]) == _transformers_counts(config)


def test_glm_flash_ignores_first_k_dense_replace_as_transformers_does(tmp_path: Path) -> None:
    """Glm4MoeLiteConfig reads mlp_layer_types (absent: the first layer dense), never first_k_dense_replace."""
    config = shrunk("glm_4_7_flash", first_k_dense_replace=3)
    text = _imported(config, tmp_path)
    assert "first_k_dense 1" in text and "mla { q_lora_rank 768" in text
    params = _params(tmp_path)
    assert (params["total"], params["active"]) == _transformers_counts(config)


def test_glm_flash_layers_follow_mlp_layer_types(tmp_path: Path) -> None:
    config = shrunk("glm_4_7_flash", num_hidden_layers=6, mlp_layer_types=["dense", "sparse", "dense"] + ["sparse"] * 3)
    text = _imported(config, tmp_path)
    assert "stack [dense, moe, dense, moe * 3]" in text, text
    params = _params(tmp_path)
    assert (params["total"], params["active"]) == _transformers_counts(config)


@pytest.mark.parametrize(("name", "value", "says"), [
    ("glm_4_7_flash", ["dense", "moe"] + ["sparse"] * 45, "expected one of 'dense', 'sparse' per layer"),
    ("glm_4_7_flash", ["dense"] * 3, "mlp_layer_types lists 3 layers, but num_hidden_layers is 47"),
    # Glm4MoeConfig has no mlp_layer_types: the glm4_moe rules do not read it.
    ("glm_4_5_air", ["dense"] * 46, "mlp_layer_types"),
])
def test_a_bad_mlp_layer_types_is_refused_naming_it(name: str, value: Any, says: str, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(shrunk(name, mlp_layer_types=value)), encoding="utf-8")
    refused = _hpdsl("import-hf", "config.json", "-o", "glm.hpf", cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert says in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    assert not (tmp_path / "glm.hpf").exists()


def test_deepseek_attention_bias_biases_the_latent_down_projections(tmp_path: Path) -> None:
    """DeepseekV3Attention's attention_bias biases q_a_proj, kv_a_proj_with_mqa and o_proj (families/mla.hpf)."""
    config = shrunk("deepseek_v3_1", attention_bias=True, num_hidden_layers=5, n_routed_experts=16)
    _imported(config, tmp_path)
    params = _params(tmp_path)
    assert (params["total"], params["active"]) == _transformers_counts(config)


GLM_5_2_STACK = "stack [indexed_dense * 3, [shared_index_moe * 3, indexed_moe] * 18, shared_index_moe * 3]"
"""zai-org/GLM-5.2's 78 layers: three dense, then MoE; each layer's own DSA indexer or the previous one's selection."""


def test_glm_5_2_s_shared_index_layers_are_kinds_without_an_indexer(tmp_path: Path) -> None:
    text = _imported(shrunk("glm_5_2"), tmp_path)
    assert GLM_5_2_STACK in text


@pytest.mark.parametrize("derivation", ["index_topk_freq", "index_topk_pattern"])
def test_glm_5_2_s_layers_derive_from_the_keys_glm_moe_dsa_config_derives_them_from(derivation: str,
                                                                                     tmp_path: Path) -> None:
    # GlmMoeDsaConfig: indexer_types, else index_topk_pattern ("F"/"S"), else freq 4 and offset 3.
    config = shrunk("glm_5_2", drop=("indexer_types",))
    if derivation == "index_topk_pattern":
        config["index_topk_pattern"] = "".join("F" if t == "full" else "S" for t in shrunk("glm_5_2")["indexer_types"])
        del config["index_topk_freq"]
    assert GLM_5_2_STACK in _imported(config, tmp_path)


def test_the_layer_types_transformers_writes_for_a_dsa_model_say_nothing_more(tmp_path: Path) -> None:
    # nvidia/GLM-5.2-NVFP4's file states them as transformers 5.11 wrote them, one value for every layer.
    config = shrunk("glm_5_2", layer_types=["deepseek_sparse_attention"] * 78)
    assert GLM_5_2_STACK in _imported(config, tmp_path)


def test_a_layer_list_of_other_values_is_refused_naming_the_key(tmp_path: Path) -> None:
    config = shrunk("glm_5_2")
    config["indexer_types"] = ["full", "sparse"] + config["indexer_types"][2:]
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    run = _hpdsl("import-hf", "config.json", cwd=tmp_path)
    assert run.returncode == 1 and "indexer_types holds 'sparse'; expected one of 'full', 'shared'" in run.stderr
