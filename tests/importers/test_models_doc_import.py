"""docs/models.md's Qwen3-Next import is the real config's: the published config.json imported, shown verbatim."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hpdsl.api import check_sources
from hpdsl.diagnostics import Source
from hpdsl.importers.hf import import_hf_config

MODELS_DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"

QWEN3_NEXT_FILE = Path(__file__).resolve().parent / "configs" / "qwen3_next_80b_a3b_thinking.json"
"""Qwen/Qwen3-Next-80B-A3B-Thinking's config.json as published, byte for byte, from ai-dynamo/aiconfigurator
src/aiconfigurator/model_configs/Qwen--Qwen3-Next-80B-A3B-Thinking_config.json at
1b7cfb10a6fa06880ad7911db5ddb949882ff76a. The Thinking and Instruct models share one architecture; the
file states no MTP key (transformers writes none for it)."""
QWEN3_NEXT_80B_A3B: dict[str, Any] = json.loads(QWEN3_NEXT_FILE.read_text(encoding="utf-8"))


def test_the_models_doc_shows_the_published_config_imported() -> None:
    registry = check_sources([], stdlib=True).registry
    assert registry is not None
    imported = import_hf_config(QWEN3_NEXT_80B_A3B, profiles=registry.profiles, name="qwen3_next")
    shown = re.search(r"\$ cat qwen3_next\.hpf\n(.*?)```", MODELS_DOC.read_text(), re.S)
    assert shown is not None
    assert shown.group(1) == imported.text
    assert "ffn_width 5120" in imported.text and "mtp" not in imported.text


def test_the_imported_count_equals_transformers() -> None:
    import pytest

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hpdsl.cost import bind, parameters

    registry = check_sources([], stdlib=True).registry
    assert registry is not None
    imported = import_hf_config(QWEN3_NEXT_80B_A3B, profiles=registry.profiles, name="qwen3_next")
    compiled = check_sources([Source("qwen3_next.hpf", imported.text)], stdlib=True).registry
    assert compiled is not None
    model = compiled.models["qwen3_next"]
    with torch.device("meta"):
        hf = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**QWEN3_NEXT_80B_A3B))
    total = sum(p.numel() for p in hf.parameters())
    assert parameters(bind(model, compiled.profiles[model.profile])).total == total == 79_674_391_296
