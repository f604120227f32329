"""Mllama's cross_attention_layers (a built-in read, hpdsl/importers/hf_layers.py) through the real CLI.

Each config is the published Llama-3.2-90B-Vision file (tests/data/hf/llama_3_2_90b_vision.json,
meta-llama/Llama-3.2-90B-Vision-Instruct's config.json; tests/data/hf/SOURCES.md), as published or
with one visible change to its text_config; a count is transformers' MllamaForCausalLM of that
text_config on the meta device (its text model class, as bench/hf_counts.py counts `text_total`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hpdsl.api import compile_sources
from hpdsl.diagnostics import Source
from hpdsl.ir.stack import layer_kinds
from tests.importers.hf_configs import published

SMALLER = {"hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 12, "num_attention_heads": 8,
           "num_key_value_heads": 2, "vocab_size": 1000, "pad_token_id": None}
"""Dims small enough to count quickly (the padding id, past the small vocabulary, null); every other key
is the published file's."""


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _write(tmp_path: Path, *, drop: tuple[str, ...] = (), **text: Any) -> dict[str, Any]:
    config = published("llama_3_2_90b_vision")
    config["text_config"] = {k: v for k, v in {**config["text_config"], **text}.items() if k not in drop}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return config


def _import(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return _hpdsl("import-hf", "config.json", "--name", "vision", "-o", "vision.hpf", cwd=tmp_path)


def _layer_kinds(text: str) -> list[str]:
    """Return every layer's kind of the imported model, its stack compiled as hpdsl compiles it."""
    model = compile_sources([Source("vision.hpf", text)]).model("vision")
    return layer_kinds(g for g in model.groups if not g.mtp)


def _transformers_total(config: dict[str, Any]) -> int:
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    text = {k: v for k, v in config["text_config"].items() if k not in ("architectures", "model_type")}
    with torch.device("meta"):
        model = transformers.MllamaForCausalLM(transformers.MllamaTextConfig(**text))
    return sum(p.numel() for p in model.parameters())


def test_the_published_file_places_its_cross_attention_layers(tmp_path: Path) -> None:
    config = _write(tmp_path)
    imported = _import(tmp_path)
    assert imported.returncode == 0, imported.stderr
    text = (tmp_path / "vision.hpf").read_text()
    kinds = _layer_kinds(text)
    crossing = config["text_config"]["cross_attention_layers"]
    assert [i for i, kind in enumerate(kinds) if kind == "cross_attention"] == crossing
    assert len(kinds) == 100 and set(kinds) == {"full_attention", "cross_attention"}
    assert "cross_qk_norm true" in text and "embed_extra_rows 8" in text


@pytest.mark.parametrize("layers", [[0, 5, 11], [], [7]])
def test_other_cross_attention_layers_give_transformers_count(layers: list[int], tmp_path: Path) -> None:
    config = _write(tmp_path, cross_attention_layers=layers, **SMALLER)
    assert _import(tmp_path).returncode == 0
    estimate = _hpdsl("estimate", "vision.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    assert json.loads(estimate.stdout)["params"]["total"] == _transformers_total(config)


@pytest.mark.parametrize(("change", "words"), [
    ({"cross_attention_layers": "3,8"}, "expected a list of layer numbers"),
    ({"cross_attention_layers": [3, True]}, "expected a list of layer numbers"),
    ({"cross_attention_layers": [3, 100]}, "outside the model's 100"),
    ({"cross_attention_layers": None}, "states no cross_attention_layers"),
])
def test_a_bad_or_missing_list_is_refused_naming_its_key(change: dict[str, Any], words: str, tmp_path: Path) -> None:
    _write(tmp_path, **change)
    refused = _import(tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "cross_attention_layers" in refused.stderr and words in refused.stderr
    assert "Traceback" not in refused.stderr


def test_an_absent_list_is_refused_not_priced_as_self_attention(tmp_path: Path) -> None:
    _write(tmp_path, drop=("cross_attention_layers",))
    refused = _import(tmp_path)
    assert refused.returncode == 1 and "[3, 8, 13, 18, 23, 28, 33, 38]" in refused.stderr
    assert not (tmp_path / "vision.hpf").exists()
