"""DeepSeek-V4 (profiles/deepseek_v4.hpf) built by hpdsl and held to transformers' DeepseekV4ForCausalLM.

The published DeepSeek-V4-Flash config (tests/data/hf/deepseek_v4_flash.json) made small (shrunk: the
changed keys are SMALL's, every construct kept: four hyper-connection streams, sliding, CSA and HCA
layers, the first three hash-routed, sqrtsoftplus scores, swiglu_limit, grouped low-rank output, sinks)
is imported with hpdsl's importer and built by hpdsl.torch.build_model: the build has the estimate's
count, which is transformers' on the meta device; loaded with transformers' random weights (the norms,
biases, sinks, hyper-connection weights and the hash lookup moved off their initial values) it gives
transformers' logits to 1e-4 (float32, CPU, no cache). The window (8) and the HCA ratio (8, compress_rates)
are small enough for a 40-token sequence to close HCA windows and slide past the window.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.cost import bind, parameters  # noqa: E402
from tests.importers.hf_configs import shrunk  # noqa: E402
from tests.torch.hf_pair import hf_pair  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from hf_counts import hf_counts  # noqa: E402  (bench/hf_counts.py: transformers' count on the meta device)

SMALL: dict[str, Any] = {
    "hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4, "head_dim": 32, "qk_rope_head_dim": 8,
    "q_lora_rank": 24, "o_groups": 2, "o_lora_rank": 16, "index_n_heads": 4, "index_head_dim": 16,
    "index_topk": 3, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
    "vocab_size": 128, "sliding_window": 8, "swiglu_limit": 1.0,
    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
}
"""The published file's keys made small: six layers (its first six compress_ratios, 0 0 4 128 4 128: sliding,
CSA, HCA; the first three hash-routed); a window of 8, HCA windows of 8 and a swiglu_limit of 1 that acts."""


def _config() -> dict[str, Any]:
    return shrunk("deepseek_v4_flash", **SMALL)


def test_the_build_has_the_estimate_s_count_which_is_transformers() -> None:
    config = _config()
    ours, _, registry = hf_pair(config)
    model = registry.models["scaled"]
    estimated = parameters(bind(model, registry.profile(model.profile), families=registry.families))
    total, active = hf_counts(config, "causal")
    assert (estimated.total, estimated.active) == (total, active)
    assert sum(p.numel() for p in ours.parameters()) == total


def test_deepseek_v4_gives_transformers_logits() -> None:
    config = _config()
    ours, theirs, registry = hf_pair(config)
    generator = torch.Generator().manual_seed(2)
    state = theirs.state_dict()
    with torch.no_grad():  # off the initial values: a misread sink, bias, norm or stream weight shows
        for name, tensor in state.items():
            if name.endswith("tid2eid"):
                tensor.copy_(torch.randint(0, config["n_routed_experts"], tensor.shape, generator=generator))
            elif tensor.is_floating_point() and any(word in name for word in ("norm", "bias", "sinks", "_hc.",
                                                                               "hc_head", "correction")):
                tensor.add_(torch.randn(tensor.shape, generator=generator) * 0.3)
    theirs.load_state_dict(state)
    from hpdsl.torch.weights import load_hf_state_dict

    model = registry.models["scaled"]
    load_hf_state_dict(ours, theirs.state_dict(), registry.profile(model.profile), "deepseek_v4",
                       registry.profiles, model_ir=model)
    ids = torch.randint(0, config["vocab_size"], (2, 40), generator=generator)
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(input_ids=ids).logits, atol=1e-4, rtol=1e-4)
