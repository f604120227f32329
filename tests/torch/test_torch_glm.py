"""GLM-4.5's attention against transformers: the same weights give the same logits.

tests/data/hf/glm_4_5_air.json (zai-org/GLM-4.5-Air's published config,
tests/data/hf/SOURCES.md) is scaled down to three small layers, all dense
(first_k_dense_replace = num_hidden_layers), with the keys GLM-4.7's published config
states: q/k/v biases (attention_bias), a per-head QK-norm (use_qk_norm) and half of each
head's dims rotated (partial_rotary_factor 0.5). It is imported with hpdsl's importer and
built by hpdsl.torch.build_model; transformers' Glm4MoeForCausalLM of the same config, with
random weights, lends them to hpdsl's model under the profiles' weight rules, and both give the same
logits to 1e-4 in float32 on the CPU; so does a dense GLM-4.7-Flash (glm_4_7_flash.json:
multi-head latent attention, its rotary pairs interleaved). The MoE layers (sigmoid routing
with a score correction and a scale) are compared in tests/torch/test_hf_logits.py.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.importers.hf_configs import shrunk  # noqa: E402
from tests.torch.hf_pair import hf_pair  # noqa: E402

SEQ, VOCAB = 12, 101
SCALED = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, "first_k_dense_replace": 3,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": VOCAB,
          "max_position_embeddings": 64, "n_routed_experts": 4, "num_experts_per_tok": 2,
          "moe_intermediate_size": 32, "pad_token_id": None, "rope_theta": 10000.0}
"""The small dims (the file's own rms_norm_eps); no pad token (the file's is past the small vocab);
rope_theta at the built rotary's base 10000 (the importer reads no rotary base: profiles/default.hpf ignores it)."""

def _pair(config: dict[str, Any]) -> tuple[Any, Any]:
    """Return (hpdsl model, transformers model), transformers' random weights in both."""
    ours, theirs, _ = hf_pair(config)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    return ours, theirs


@pytest.mark.parametrize("changes", [
    {"attention_bias": True, "use_qk_norm": True, "partial_rotary_factor": 0.5},
    {"attention_bias": False, "use_qk_norm": False, "partial_rotary_factor": 0.25},
], ids=["glm_4_7_published_flags", "unbiased_quarter_rotary"])
def test_dense_glm_logits_equal_transformers(changes: dict[str, Any]) -> None:
    ours, theirs = _pair(shrunk("glm_4_5_air", **SCALED, **changes))
    ids = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = theirs(input_ids=ids).logits
        found = ours(ids)
    torch.testing.assert_close(found, expected, atol=1e-4, rtol=1e-4)


FLASH = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, "mlp_layer_types": ["dense"] * 3,
         "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 8, "vocab_size": VOCAB,
         "max_position_embeddings": 64, "n_routed_experts": 4, "num_experts_per_tok": 2,
         "moe_intermediate_size": 32, "q_lora_rank": 24, "kv_lora_rank": 16,
         "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 12}
"""GLM-4.7-Flash's small dims (head_dim is Glm4MoeLiteConfig's alias of qk_rope_head_dim), every layer dense."""


@pytest.mark.parametrize("changes", [{}, {"rope_interleave": False}, {"attention_bias": True}],
                         ids=["interleaved_rotary_by_default", "rotary_not_interleaved", "biased_latents"])
def test_dense_glm_flash_logits_equal_transformers(changes: dict[str, Any]) -> None:
    """GLM-4.7-Flash's latent attention: Glm4MoeLiteConfig's rope_interleave (default true) regroups the rotary pairs."""
    ours, theirs = _pair(shrunk("glm_4_7_flash", **FLASH, **changes))
    ids = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(input_ids=ids).logits, atol=1e-4, rtol=1e-4)


def test_full_rotary_glm_weights_give_other_logits() -> None:
    """The rotary fraction is what the attention runs: GLM's weights rotated over every dim differ."""
    config = shrunk("glm_4_5_air", **SCALED, attention_bias=True, use_qk_norm=True, partial_rotary_factor=0.5)
    ours, theirs = _pair(config)
    full, _ = _pair({**config, "partial_rotary_factor": 1.0})
    full.load_state_dict(ours.state_dict())
    ids = torch.randint(0, VOCAB, (1, SEQ), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert not torch.allclose(full(ids), theirs(input_ids=ids).logits, atol=1e-3)
