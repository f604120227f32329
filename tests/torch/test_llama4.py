"""Llama 4 (profiles/llama4.hpf): the built model computes what transformers' Llama4ForCausalLM computes.

Each case is a published Llama 4 file (tests/data/hf/, sources in tests/data/hf/SOURCES.md) at small
dims, its text_config as transformers builds it: Scout's (every layer MoE, QK-norm, llama3 rope) and
Maverick's (MoE every second layer, the others dense at intermediate_size_mlp, no QK-norm). The
scaled configs cut attention_chunk_size to 5 and floor_scale to 4, so that the 12 positions span
three chunks of the rotary layers and the no-position layers' query temperature acts; the 4 layers
hold three rotary layers and one without positions (no_rope_layer_interval 4, the class's default).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.importers.cli_import import published_built_total  # noqa: E402
from tests.importers.hf_configs import DATA  # noqa: E402
from tests.torch.hf_pair import hf_pair  # noqa: E402
from tests.torch.test_hf_logits import SEQ, VOCAB, scaled  # noqa: E402

SMALL_LLAMA4 = {"num_hidden_layers": 4, "head_dim": 16, "num_local_experts": 4, "intermediate_size": 48,
                "intermediate_size_mlp": 80, "attention_chunk_size": 5, "floor_scale": 4, "attn_scale": 0.5}
"""Llama 4's own dims at test size (the head dim 16, four experts, the dense MLP wider than an expert)."""

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "scout": ("llama_4_scout_17b_16e_instruct", SMALL_LLAMA4),
    # Two experts per token: each (token, expert) pair's input scaled by its own weight.
    "scout_top2": ("llama_4_scout_17b_16e_instruct", {**SMALL_LLAMA4, "num_experts_per_tok": 2}),
    "maverick": ("llama_4_maverick_17b_128e_instruct", SMALL_LLAMA4),
}


def _ids() -> Any:
    return torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("case", list(CASES))
def test_logits_equal_transformers(case: str) -> None:
    name, changes = CASES[case]
    ours, theirs, _ = hf_pair(scaled(name, changes), jitter=0.1)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    with torch.no_grad():
        expected = theirs(input_ids=_ids(), use_cache=False).logits
        torch.testing.assert_close(ours(_ids()), expected, atol=1e-4, rtol=1e-4)


def test_the_chunks_and_the_temperature_change_the_logits() -> None:
    """Each construct acts at the scaled dims: without it the logits differ (the test above is not vacuous)."""
    name, changes = CASES["scout"]
    ours, theirs, _ = hf_pair(scaled(name, changes), jitter=0.1)
    for other in ({"attention_chunk_size": 64}, {"floor_scale": 64}):  # no chunk, no temperature within 12
        _, without, _ = hf_pair(scaled(name, {**changes, **other}), jitter=0.1)
        without.load_state_dict(theirs.state_dict())
        with torch.no_grad():
            assert not torch.allclose(ours(_ids()), without(input_ids=_ids(), use_cache=False).logits, atol=1e-3)


@pytest.mark.parametrize("name", ["llama_4_scout_17b_16e_instruct", "llama_4_maverick_17b_128e_instruct"])
def test_the_published_model_builds_with_transformers_count(name: str, tmp_path: Path) -> None:
    """build_model of the imported published file, on the meta device, holds transformers' count."""
    counts = json.loads((DATA / "counts.json").read_text(encoding="utf-8"))["counts"][name]
    assert published_built_total(name, tmp_path) == counts.get("text_total", counts["total"])
