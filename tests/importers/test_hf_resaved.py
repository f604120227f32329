"""Every published config of tests/data/hf/, re-saved by the installed transformers, imports exact too.

A file saved by transformers 5 (`AutoConfig.for_model(**published).to_dict()`, what `save_pretrained`
writes) states what its config class derives and keeps in its own form: DeepSeek-V3.2's
mlp_layer_types, DeepSeek-V4's per-rope rope_parameters ("main", "compress"), Gemma 4's
per_layer_config table in place of global_head_dim, EXAONE 4.5's text model as "exaone4" with its
MTP keys, Kimi-K2.5's projector keys. Each must still price as transformers counts it
(tests/data/hf/counts.json), as the published file does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

transformers = pytest.importorskip("transformers")

from hpdsl.api import compile_paths, compile_sources  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from tests.importers.hf_configs import DATA, FILES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
COUNTS: dict[str, Any] = json.loads((DATA / "counts.json").read_text(encoding="utf-8"))["counts"]
STDLIB = compile_paths([ROOT / "profiles", ROOT / "families"])


def resaved(name: str) -> dict[str, Any]:
    """Return the published file as the installed transformers writes it back (its storage keys left out)."""
    published = json.loads((DATA / FILES[name][0]).read_text(encoding="utf-8"))
    published.pop("quantization_config", None)  # storage, not the model (bench/hf_counts.py)
    saved: dict[str, Any] = transformers.AutoConfig.for_model(**published).to_dict()
    saved.pop("quantization_config", None)
    return saved


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_resaved_published_config_imports_exact(name: str) -> None:
    imported = import_hf_config(resaved(name), profiles=STDLIB.profiles, name="resaved")
    registry = compile_sources([Source("resaved.hpf", imported.text)])
    model = registry.models["resaved"]
    counted = parameters(bind(model, registry.profile(model.profile), families=registry.families))
    expected = COUNTS[name]
    total, active = ("text_total", "text_active") if "text_total" in expected else ("total", "active")
    assert (counted.total, counted.active) == (expected[total], expected[active])
