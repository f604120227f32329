"""The profiles' import rules against transformers: every default is the config class's, every key is sorted.

A profile's `hf "model_type" { default KEY = VALUE }` rules (profiles/*.hpf,
docs/importing.md) say what transformers' config class uses when a config.json leaves a
key out; the importer never imports transformers, so this test holds every standard
profile's defaults to the installed transformers' config classes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpdsl.api import check_sources
from hpdsl.importers.hf_config import value_at
from hpdsl.importers.rules import EVERY_CONFIG

transformers = pytest.importorskip("transformers")


def _defaults() -> dict[str, dict[str, object]]:
    """Return model_type → key → default, from every standard profile's hf blocks."""
    registry = check_sources([], stdlib=True).registry
    assert registry is not None
    found: dict[str, dict[str, object]] = {}
    for profile in registry.profiles.values():
        for block in profile.imports:
            for model_type in block.model_types or profile.model_types:
                if model_type != EVERY_CONFIG and block.defaults:
                    found.setdefault(model_type, {}).update(block.defaults)
    return found


DEFAULTS = _defaults()

from tests.importers.cli_import import import_config  # noqa: E402
from tests.importers.hf_configs import CONFIGS, shrunk  # noqa: E402


CONFIG_CLASS_OF = {"kimi_k2": "deepseek_v3", "exaone4_5_text": "exaone4"}
"""model_types transformers reads with another's config class: Kimi_K25Config builds a kimi_k2 text_config
as a DeepseekV3Config (transformers/models/kimi_k25/configuration_kimi_k25.py), Exaone4_5_Config an
exaone4_5_text one as an Exaone4Config (configuration_exaone4_5.py)."""


def _pattern_of(layer_types: list[str]) -> int | None:
    """Return p where layer i attends fully iff (i + 1) % p == 0 (Gemma's sliding_window_pattern), else None."""
    for period in range(1, len(layer_types) + 1):
        if layer_types == ["full_attention" if (i + 1) % period == 0 else "sliding_attention"
                           for i in range(len(layer_types))]:
            return period
    return None


def _class_default(model_type: str, key: str) -> object:
    config_class = transformers.CONFIG_MAPPING[CONFIG_CLASS_OF.get(model_type, model_type)]
    if model_type == "t5" and key == "num_decoder_layers":
        return None  # T5Config stores num_layers in its place: absent means "as many as the encoder"
    if model_type == "gpt2" and key == "n_inner":
        return config_class().n_inner
    config = config_class()
    if model_type == "gemma4_text" and key in ("head_dim", "global_head_dim"):
        # Gemma4TextConfig keeps head dims per layer: a sliding layer's head_dim, a full layer's global one.
        kind = "full_attention" if key == "global_head_dim" else "sliding_attention"
        return config.per_layer_config[config.layer_types.index(kind)].head_dim
    if model_type == "deepseek_v4" and key == "num_hash_layers":
        # DeepseekV4Config reads the legacy key into mlp_layer_types (its first default_num_hash_layers hash_moe)
        return config.mlp_layer_types.count("hash_moe")
    if key.startswith("rope_parameters."):  # a rotary default inside the object transformers 5 keeps them in
        return value_at({"rope_parameters": config.rope_parameters}, key)
    # A composite config's rotary defaults are its text model's.
    rope = getattr(config.get_text_config(), "rope_parameters", None) or {}
    if key == "rope_theta":  # transformers 5 keeps the base in rope_parameters (the full layers', per type)
        return rope.get("rope_theta") or value_at(rope, "full_attention.rope_theta")
    if key == "rope_local_base_freq":
        return value_at(rope, "sliding_attention.rope_theta")
    value = getattr(config, key, None)
    if key in ("partial_rotary_factor", "rotary_pct") and value is None:
        # transformers 5 keeps it in rope_parameters (GPTNeoXConfig reads its older rotary_pct into it)
        value = rope.get("partial_rotary_factor")
        per_type = {p.get(key) for p in rope.values() if isinstance(p, dict)}
        if value is None and len(per_type) == 1:  # ... per layer type, alike (MiMoV2FlashConfig)
            value = per_type.pop()
    if key == "sliding_window" and value is not None and not config.to_dict().get(key):
        return None
    if key == "_sliding_window_pattern" and value is None and getattr(config, "layer_types", None):
        return _pattern_of(config.layer_types)  # Gemma2Config has no such key; its layer_types None is one
    if model_type == "jamba" and key == "mamba_dt_rank" and value == -(-config.hidden_size // 16):
        return "auto"  # JambaConfig resolves "auto" to ⌈hidden_size / 16⌉ on construction; so does the importer
    if model_type == "bamba" and key == "mamba_d_head" and value == config.mamba_expand * config.hidden_size \
            // config.mamba_n_heads:
        return "auto"  # BambaConfig resolves "auto" to d_inner / heads; the importer reads the heads
    return value


def test_the_profiles_state_the_defaults_of_every_model_type_they_used_to() -> None:
    """The table hpdsl/importers/hf_keys.py held before the rules moved into the profiles."""
    assert set(DEFAULTS) >= {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
                             "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_vl", "qwen3_vl_text", "deepseek_v2",
                             "deepseek_v3", "t5", "phi3", "starcoder2", "gpt2", "olmoe", "gemma3_text", "gpt_oss",
                             "bamba", "nemotron_h", "jamba"}


@pytest.mark.parametrize("model_type", sorted(DEFAULTS))
def test_defaults_are_transformers_config_defaults(model_type: str) -> None:
    for key, value in DEFAULTS[model_type].items():
        assert _class_default(model_type, key) == value, (model_type, key)


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_an_unknown_key_is_refused_naming_it_and_allow_unknown_warns(tmp_path: Path) -> None:
    config, _ = CONFIGS["mistral_7b_v0_1"]
    (tmp_path / "config.json").write_text(json.dumps({**config, "mamba_d_state": 16}))
    refused = _hpdsl("import-hf", "config.json", cwd=tmp_path)
    assert refused.returncode == 1 and "mamba_d_state" in refused.stderr and not refused.stdout
    allowed = _hpdsl("import-hf", "config.json", "--allow-unknown", cwd=tmp_path)
    assert allowed.returncode == 0
    assert "IGNORED 1 config key(s)" in allowed.stderr and "WRONG" in allowed.stderr


def test_an_author_profile_imports_its_own_model_type(tmp_path: Path) -> None:
    (tmp_path / "acme.hpf").write_text(
        'profile acme {\n  model_types "acme_lm"\n  kind decoder {\n'
        '    ops { attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1'
        '  linrec 0 }\n  }\n  facts { qkv_bias = false  o_bias = false  mlp_bias = false  norm_bias = false }\n}\n')
    config, _ = CONFIGS["mistral_7b_v0_1"]
    acme = {k: v for k, v in config.items() if k != "sliding_window"}
    (tmp_path / "config.json").write_text(json.dumps({**acme, "model_type": "acme_lm"}))
    refused = _hpdsl("import-hf", "config.json", cwd=tmp_path)
    assert refused.returncode == 1 and "acme_lm" in refused.stderr and "llama2 (llama" in refused.stderr
    imported = _hpdsl("import-hf", "config.json", "--profiles", "acme.hpf", "--name", "a", "-o", "a.hpf",
                      cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "model a : acme" in (tmp_path / "a.hpf").read_text()
    estimate = _hpdsl("estimate", "acme.hpf", "a.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    assert json.loads(estimate.stdout)["params"]["total"] == 7_241_732_096  # Mistral-7B's shape


def test_a_gpt2_config_without_n_positions_gets_transformers_1024_rows(tmp_path: Path) -> None:
    """GPT2Config's n_positions default sizes the learned position table; never zero rows."""
    torch = pytest.importorskip("torch")
    config = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert _hpdsl("import-hf", "config.json", "--name", "g", "-o", "g.hpf", cwd=tmp_path).returncode == 0
    assert "max_positions 1024" in (tmp_path / "g.hpf").read_text()
    estimate = _hpdsl("estimate", "g.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    with torch.device("meta"):
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**config))
    assert json.loads(estimate.stdout)["params"]["total"] == sum(p.numel() for p in hf.parameters())


@pytest.mark.parametrize(("name", "key"), [("gpt2_large", "layer_norm_epsilon"), ("gpt_neox_20b", "layer_norm_eps"),
                                           ("qwen3_8b", "rms_norm_eps")])
def test_a_config_leaving_its_epsilon_out_takes_its_config_classs(tmp_path: Path, name: str, key: str) -> None:
    """The published file without its eps key: the profile's `default` is the class's (1e-5 or 1e-6, checked above)."""
    imported = import_config(shrunk(name, drop=(key,)), tmp_path, "m")
    assert imported.returncode == 0, imported.stderr
    expected = "1.0e-05" if name != "qwen3_8b" else "1.0e-06"  # GPT2Config, GPTNeoXConfig: 1e-5; Qwen3Config: 1e-6
    text = (tmp_path / "m.hpf").read_text()
    assert f"  norm_eps {expected}\n" in text or (expected == "1.0e-06" and "norm_eps" not in text), text
