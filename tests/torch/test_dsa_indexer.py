"""DeepSeek Sparse Attention: the reference MLA's lightning indexer against transformers' DeepseekV32Indexer.

The indexer's parameters are transformers' (names and shapes), and with the same weights it
selects the same keys for every query (transformers 5.24, CPU, the published DeepSeek-V3.2
config made small); the sparse MLA attends over those keys alone, and its indexer learns
from its KL objective without changing the layer's output. The full-size counts are
tests/cost/test_params_hf_real.py's, the scaled builds tests/torch/test_scaled_configs.py's.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers.models.deepseek_v32.modeling_deepseek_v32 import (  # noqa: E402
    DeepseekV32Indexer, DeepseekV32RotaryEmbedding,
)

from hpdsl.bound.config import LayerConfig  # noqa: E402
from hpdsl.torch.modules import MLAttention  # noqa: E402
from hpdsl.torch.modules.indexer import Indexer  # noqa: E402
from tests.importers.hf_configs import shrunk  # noqa: E402

SEQ = 12
DIMS = {"hidden_size": 64, "q_lora_rank": 32, "index_n_heads": 4, "index_head_dim": 16, "index_topk": 4,
        "qk_rope_head_dim": 8, "num_hidden_layers": 1}


def _transformers_config() -> transformers.DeepseekV32Config:
    # The published DeepSeek-V3.2 file with DIMS set; its yarn rope_scaling dropped (default rotary, as hpdsl's).
    return transformers.DeepseekV32Config(**shrunk("deepseek_v3_2", drop=("rope_scaling", "quantization_config"),
                                                   **DIMS))


def _mla_config(topk: int = 4, index_heads: int = 4) -> LayerConfig:
    return LayerConfig(hidden=64, heads=4, kv_heads=4, head_dim=16, attn_kind="mla", q_lora_rank=32,
                       kv_lora_rank=16, rope_dim=8, nope_dim=16, v_head_dim=16, index_n_heads=index_heads,
                       index_head_dim=16, index_topk=topk, rope_theta=10000.0)


def test_the_indexer_selects_the_keys_transformers_selects() -> None:
    hf_config = _transformers_config()
    theirs = DeepseekV32Indexer(hf_config, 0).float()
    ours = Indexer(_mla_config())
    assert {n: p.shape for n, p in ours.named_parameters()} == {n: p.shape for n, p in theirs.named_parameters()}
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in theirs.named_parameters():
            param.normal_()
            ours.get_parameter(name).copy_(param)
    x, latent, positions = torch.randn(2, SEQ, 64), torch.randn(2, SEQ, 32), torch.arange(SEQ)
    cos, sin = DeepseekV32RotaryEmbedding(hf_config)(x, positions[None].expand(2, -1))
    causal = torch.ones(SEQ, SEQ, dtype=torch.bool).tril()
    top = theirs(x, latent, (cos, sin), causal[None].expand(2, -1, -1), positions[None])
    expected = torch.zeros(2, SEQ, SEQ, dtype=torch.bool).scatter(-1, top.long(), True) & causal
    selected = ours.select(ours.scores(x, latent, ours.keys(x, positions), positions), causal)
    assert torch.equal(selected, expected)
    assert selected.sum(-1).tolist() == [[min(i + 1, 4) for i in range(SEQ)]] * 2


def _pair(topk: int) -> tuple[MLAttention, MLAttention]:
    """Return a sparse MLA (a 4-head indexer choosing `topk` keys) and the dense MLA with its weights."""
    torch.manual_seed(0)
    sparse, dense = MLAttention(_mla_config(topk)), MLAttention(_mla_config(index_heads=0))
    dense.load_state_dict({k: v for k, v in sparse.state_dict().items() if not k.startswith("indexer.")})
    return sparse, dense


def test_sparse_attention_attends_over_the_selected_keys_only() -> None:
    x = torch.randn(2, SEQ, 64)
    sparse, dense = _pair(topk=SEQ)
    with torch.no_grad():  # every visible key selected: the dense attention
        torch.testing.assert_close(sparse(x), dense(x))
    sparse, dense = _pair(topk=2)
    with torch.no_grad():
        out, reference = sparse(x), dense(x)
    # The first two queries see at most two keys, all selected; the later ones lose keys.
    torch.testing.assert_close(out[:, :2], reference[:, :2])
    assert not torch.allclose(out[:, 2:], reference[:, 2:])


def test_the_indexer_learns_from_its_kl_objective_alone() -> None:
    sparse, _ = _pair(topk=3)
    x = torch.randn(2, SEQ, 64, requires_grad=True)
    with torch.no_grad():
        untrained = sparse(x)
    out = sparse(x)
    torch.testing.assert_close(out, untrained)  # the objective's gradient rides on the output, not its value
    out.square().sum().backward()
    indexer = sparse.indexer
    assert indexer is not None
    grads = {n: p.grad for n, p in indexer.named_parameters()}
    # The same objective from the module's own steps: inputs detached, the attention's distribution the target.
    latent = sparse.q_a_layernorm(sparse.q_a_proj(x)).detach()
    positions = torch.arange(SEQ)
    scores = indexer.scores(x.detach(), latent, indexer.keys(x.detach(), positions), positions)
    selected = indexer.select(scores, torch.ones(SEQ, SEQ, dtype=torch.bool).tril())
    q, k = _queries_and_keys(sparse, x.detach(), positions)
    target = sparse.attention_target(q, k, selected, sparse.config.q_head_dim ** -0.5)
    expected = torch.autograd.grad(indexer.kl_loss(scores, selected, target), list(indexer.parameters()))
    for (name, grad), want in zip(grads.items(), expected):
        assert grad is not None and grad.abs().sum() > 0, name
        torch.testing.assert_close(grad, want)


def _queries_and_keys(mla: MLAttention, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Return MLA's query and key heads [b, s, heads, nope + rope] as its forward builds them."""
    c, (batch, seq, _) = mla.config, x.shape
    q = mla.q_b_proj(mla.q_a_layernorm(mla.q_a_proj(x))).view(batch, seq, -1, c.q_head_dim)
    q_nope, q_rope = q.split([mla.nope, c.rope_dim], dim=-1)
    latent, k_rope = mla.kv_a_proj_with_mqa(x).split([c.kv_lora_rank, c.rope_dim], dim=-1)
    kv = mla.kv_b_proj(mla.kv_a_layernorm(latent)).view(batch, seq, -1, mla.nope + c.head_dim)
    k_nope = kv[..., :mla.nope]
    k_rope = k_rope.view(batch, seq, 1, c.rope_dim).expand(-1, -1, kv.shape[2], -1)
    q = torch.cat([q_nope, mla.rotary(q_rope, positions)], dim=-1)
    k = torch.cat([k_nope, mla.rotary(k_rope, positions)], dim=-1)
    return q, k


def test_an_indexer_without_a_query_latent_is_refused() -> None:
    with pytest.raises(ValueError, match="query latent"):
        MLAttention(LayerConfig(hidden=64, heads=4, kv_heads=4, head_dim=16, attn_kind="mla", kv_lora_rank=16,
                                rope_dim=8, nope_dim=16, v_head_dim=16, index_n_heads=2, index_head_dim=16,
                                index_topk=4))
