"""Parameter counts are exact against HuggingFace transformers, built on the meta device.

Each config is written as a config.json, imported with hpdsl's importer, compiled with
the standard library, bound and counted; the total must equal the number of parameters
of the transformers model built from the same config.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.api import check_sources  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_file  # noqa: E402


def _configs() -> dict[str, tuple[object, bool, dict]]:
    """Return name → (transformers config, is seq2seq, extra keys of the real config.json)."""
    t = transformers
    return {
        "llama2_7b": (t.LlamaConfig(), False, {}),
        "llama3_8b": (t.LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                    num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                                    max_position_embeddings=8192, rms_norm_eps=1e-5), False, {}),
        "mixtral_8x7b": (t.MixtralConfig(), False, {}),
        "qwen3_30b_a3b": (t.Qwen3MoeConfig(vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                                           moe_intermediate_size=768, num_hidden_layers=48,
                                           num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                                           num_experts=128, num_experts_per_tok=8,
                                           max_position_embeddings=40960), False, {}),
        "qwen3_next_80b_a3b": (t.Qwen3NextConfig(), False, {"num_nextn_predict_layers": 1}),
        "deepseek_v3": (t.DeepseekV3Config(), False, {"num_nextn_predict_layers": 1}),
        "t5_small": (t.T5Config(), True, {}),
    }


def hf_parameter_count(config: object, seq2seq: bool) -> int:
    """Return the parameter count of the transformers model of `config`, built on the meta device."""
    auto = transformers.AutoModelForSeq2SeqLM if seq2seq else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    return sum(p.numel() for p in model.parameters())


def hpdsl_report(config_path: Path, name: str):
    """Import a config.json, compile it with the standard library, and count its parameters."""
    stdlib = check_sources([], stdlib=True)
    assert stdlib.registry is not None
    imported = import_hf_file(config_path, profiles=stdlib.registry.profiles, name=name)
    result = check_sources([Source(f"{name}.hpf", imported.text)], stdlib=True)
    assert result.registry is not None, [d.message for d in result.diagnostics]
    model = result.registry.models[name]
    return parameters(bind(model, result.registry.profiles[model.profile]))


@pytest.mark.parametrize("name", sorted(_configs()))
def test_total_equals_transformers(name: str, tmp_path: Path) -> None:
    config, seq2seq, extra = _configs()[name]
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config.to_dict(), **extra}))
    report = hpdsl_report(path, name)
    assert report.total == hf_parameter_count(config, seq2seq)


def test_deepseek_v3_active_and_mtp(tmp_path: Path) -> None:
    config, _, extra = _configs()["deepseek_v3"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config.to_dict(), **extra}))
    report = hpdsl_report(path, "deepseek_v3")
    assert [(g.kind, g.count, g.mtp) for g in report.groups] == \
        [("dense", 3, False), ("moe", 58, False), ("moe", 1, True)]
    assert 37e9 < report.active < 38e9  # DeepSeek publishes "37B activated"
    assert 11e9 < report.mtp < 12e9     # one MoE layer plus eh_proj and its norms


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("name", sorted(_configs()))
def test_cli_import_then_estimate_equals_transformers(name: str, tmp_path: Path) -> None:
    """The user's path: `hpdsl import-hf`, `hpdsl fmt --check`, `hpdsl estimate --json`."""
    config, seq2seq, extra = _configs()[name]
    (tmp_path / "config.json").write_text(json.dumps({**config.to_dict(), **extra}))
    imported = _hpdsl("import-hf", "config.json", "--name", name, "-o", f"{name}.hpf", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert _hpdsl("fmt", "--check", f"{name}.hpf", cwd=tmp_path).returncode == 0
    estimate = _hpdsl("estimate", f"{name}.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    params = json.loads(estimate.stdout)["params"]
    assert params["total"] == hf_parameter_count(config, seq2seq)
