"""GPT-2's learned absolute positions: the built model turns no rotary embedding, and computes transformers' logits.

GPT-2 (profiles/gpt2.hpf) adds a learned position table to the token embeddings
and nothing else: its attention is position-free. The case is the published
gpt2-large config.json (tests/data/hf/gpt2_large.json, tests/data/hf/SOURCES.md)
at small dims, its own layer_norm_epsilon built. transformers' weights load under
the profile's `weight` rules (hpdsl/torch/weights.py): its fused c_attn Conv1D
(q, k and v side by side, stored transposed) by a `split` rule, no copy here.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hpdsl.errors import BuildError  # noqa: E402
from hpdsl.torch.weights import load_hf_state_dict  # noqa: E402
from tests.importers.hf_configs import published  # noqa: E402
from tests.torch.hf_pair import hf_pair  # noqa: E402

SMALL = {"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 101, "n_positions": 64, "n_ctx": 64,
         "bos_token_id": None, "eos_token_id": None}
"""The dims the scaled copy takes (its layer_norm_epsilon, 1e-5, stays the file's)."""


def test_gpt2_builds_no_rotary_and_gives_transformers_logits() -> None:
    config = {**published("gpt2_large"), **SMALL}
    ours, theirs, _ = hf_pair(config, jitter=0.1)
    assert {module.eps for module in ours.modules() if isinstance(module, torch.nn.LayerNorm)} == {1e-5}
    ids = torch.randint(0, SMALL["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(input_ids=ids, use_cache=False).logits, atol=1e-4, rtol=1e-4)


def test_the_c_attn_split_is_q_k_and_v_side_by_side() -> None:
    """Each part of the split is its share of c_attn's out features (the Conv1D's columns), transposed."""
    ours, theirs, _ = hf_pair({**published("gpt2_large"), **SMALL})
    fused = theirs.state_dict()["transformer.h.1.attn.c_attn.weight"]
    for index, part in enumerate("qkv"):
        torch.testing.assert_close(ours.state_dict()[f"layers.1.mixer.{part}_proj.weight"],
                                   fused[:, index * 64:(index + 1) * 64].t())


def test_a_split_whose_sizes_miss_the_rows_names_both_shapes() -> None:
    """c_attn's 192 rows cut by sizes for 4 heads of a model with 8 heads: one BuildError naming both."""
    ours, _, registry = hf_pair({**published("gpt2_large"), **SMALL})
    _, wider, _ = hf_pair({**published("gpt2_large"), **SMALL, "n_embd": 128, "n_head": 8})
    with pytest.raises(BuildError) as raised:
        load_hf_state_dict(ours, wider.state_dict(), registry.profile("gpt2"), "gpt2", registry.profiles,
                           model_ir=registry.models["scaled"])
    message = str(raised.value)
    assert ("transformers' 'transformer.h.0.attn.c_attn.weight' has shape (128, 384) (transposed (384, 128)), "
            "384 rows; split rule \"transformer.h.{i}.attn.c_attn.\" cuts 192 (heads * head_dim, kv_heads * head_dim, "
            "kv_heads * head_dim = 64, 64, 64), the built model's parts (64, 64), (64, 64), (64, 64)") in message
    assert "'transformer.h.1.attn.c_attn.bias' has shape (384,), 384 rows" in message
