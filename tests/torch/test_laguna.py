"""Laguna (profiles/laguna.hpf): the built model computes what transformers' LagunaForCausalLM computes.

Each case is a published Laguna file (tests/data/hf/, sources in tests/data/hf/SOURCES.md) at small
dims: one full-attention layer with a dense MLP, then sliding-window layers with their own query
head count and MoE (a sigmoid router choosing with its score correction, which transformers keeps
as a frozen parameter, one ungated shared expert, the routed output scaled by
moe_routed_scaling_factor); every attention's heads gated by softplus of g_proj (per head as published, and
per head dim); the full layer
turning half of each head at YaRN, the sliding ones every dim at the default rope. A window of 5
on 12 positions masks.
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

SMALL_LAGUNA = {"num_hidden_layers": 4, "head_dim": 16, "num_attention_heads_per_layer": [4, 6, 6, 6],
                "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"], "num_experts": 8,
                "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
                "sliding_window": 5}
"""Laguna's own dims at test size: 4 query heads on the full layer, 6 on the sliding ones (2 kv heads)."""

CASES = {"xs": "laguna_xs_2_fp8", "s": "laguna_s_2_1_fp8"}
WIDE = {**SMALL_LAGUNA, "gating": "per-element"}
"""XS's file with a gate per head dim (g_proj hidden → heads × head_dim): LagunaAttention's other granularity."""


def _ids() -> Any:
    return torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize(("case", "changes"), [("xs", SMALL_LAGUNA), ("s", SMALL_LAGUNA), ("xs", WIDE)])
def test_logits_equal_transformers(case: str, changes: dict[str, Any]) -> None:
    config = scaled(CASES[case], changes)
    config.pop("quantization_config")  # the checkpoint's storage, not the model (bench/hf_counts.py)
    ours, theirs, _ = hf_pair(config, jitter=0.1)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    with torch.no_grad():
        expected = theirs(input_ids=_ids(), use_cache=False).logits
        torch.testing.assert_close(ours(_ids()), expected, atol=1e-4, rtol=1e-4)


def test_the_softplus_gate_changes_the_logits() -> None:
    """The gate acts at the scaled dims: another g_proj gives other logits (the test above is not vacuous)."""
    config = scaled(CASES["xs"], SMALL_LAGUNA)
    config.pop("quantization_config")
    ours, theirs, _ = hf_pair(config, jitter=0.1)
    with torch.no_grad():
        for name, module in theirs.named_modules():
            if name.endswith("g_proj"):
                module.weight.zero_()  # softplus(0) = ln 2 on every head: another gate
        assert not torch.allclose(ours(_ids()), theirs(input_ids=_ids(), use_cache=False).logits, atol=1e-3)


@pytest.mark.parametrize("name", list(CASES.values()))
def test_the_published_model_builds_with_transformers_count(name: str, tmp_path: Path) -> None:
    """build_model of the imported published file, on the meta device, holds transformers' count."""
    counts = json.loads((DATA / "counts.json").read_text(encoding="utf-8"))["counts"][name]
    assert published_built_total(name, tmp_path) == counts.get("text_total", counts["total"])
