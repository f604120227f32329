"""The two FLOP conventions against the published ones: Megatron-LM's executed count and PaLM's model count.

`flops.total` (executed: causal flash attention skips the masked half of the
scores, the flash backward runs QKᵀ and the softmax again, elementwise work
counted) is held within 5% of Megatron-LM's `num_floating_point_operations`;
`flops.model_total` (the MFU convention) within 1% of PaLM's 6N + 12·L·a·d_h·s
per token. One sequence of each model, bf16, flash attention, no recompute.
"""

from __future__ import annotations

import pytest
from cost_builders import example

from hpdsl.cost import parameters
from hpdsl.cost.estimate import estimate
from hpdsl.model.strategy import Strategy


def megatron(*, s: int, h: int, layers: int, a: int, d_h: int, kv: int, ffn: int, vocab: int,
             routed: int = 1, shared: int = 0, gate: bool = False, mtp: int = 0,
             linear: tuple[int, int, int, int, int, int] | None = None) -> float:
    """Return Megatron-LM's num_floating_point_operations for one sequence (megatron/training/training.py).

    The terms, as its transformer_flops writes them with forward_backward_expansion_factor 3 and
    fma_expansion_factor 2 (every GEMM forward, wgrad and dgrad at 2 FLOPs per multiply-add):
    - self attention per layer: h·q_proj (query) + 2·h·d_h·n_kv (keys, values) +
      s·q_proj/2 + s·q_proj/2 (QKᵀ and attention·V, "causal mask: only half of the mask is
      non-zero") + q_proj·h (output), q_proj = a·d_h; with an output gate (Qwen3-Next) the query
      projection is twice as wide;
    - MLP: h·ffn·3 (SwiGLU's ffn_expansion_factor) per routed expert a token reaches
      (moe_router_topk) plus the shared expert's, per layer; the router is not counted;
    - logits: h·padded_vocab_size per prediction (main head and each MTP head);
    - MTP: per depth the 2h→h projection (2h·h) and 3h of norms, its transformer layer counted
      with the others.
    `linear` = (layers, n_k, d_k, n_v, d_v, conv): gated-DeltaNet layers in place of attention,
    counted as their projections (q, k, v, z, β, decay in; out) and short convolution plus the
    recurrence's 2·n_v·d_k·d_v multiply-adds per token (state update and read-out) — our
    transcription of Megatron's hybrid accounting, not checked against its source.
    """
    q_proj = a * d_h
    attn_layers = layers + mtp - (linear[0] if linear else 0)
    attention = (h * q_proj * (2 if gate else 1) + 2 * h * d_h * kv + s * q_proj / 2 + s * q_proj / 2
                 + q_proj * h)
    per_token = 3 * 2 * attn_layers * attention
    if linear:
        n_lin, n_k, d_k, n_v, d_v, conv = linear
        qkv = 2 * n_k * d_k + n_v * d_v
        gdn = h * (qkv + n_v * d_v + 2 * n_v) + conv * qkv / 1 + n_v * d_v * h + 2 * n_v * d_k * d_v
        per_token += 3 * 2 * n_lin * gdn
    per_token += 3 * 2 * (layers + mtp) * h * 3 * ffn * routed + 3 * 2 * (layers + mtp) * h * 3 * shared
    per_token += 3 * 2 * mtp * (3 * h + 2 * h * h)
    per_token += 3 * 2 * h * vocab * (mtp + 1)
    return s * per_token


CASES = {
    # examples/*.hpf, each from its HuggingFace config.json
    "llama2_7b": dict(s=4096, h=4096, layers=32, a=32, d_h=128, kv=32, ffn=11008, vocab=32000),
    "llama3_8b": dict(s=8192, h=4096, layers=32, a=32, d_h=128, kv=8, ffn=14336, vocab=128256),
    "mixtral_8x7b": dict(s=4096, h=4096, layers=32, a=32, d_h=128, kv=8, ffn=14336, vocab=32000, routed=2),
    "qwen3_30b_a3b": dict(s=4096, h=2048, layers=48, a=32, d_h=128, kv=4, ffn=768, vocab=151936, routed=8),
    "qwen3_next_80b_a3b": dict(s=4096, h=2048, layers=48, a=16, d_h=256, kv=2, ffn=512, vocab=151936,
                               routed=10, shared=512, gate=True, mtp=1,
                               linear=(36, 16, 128, 32, 128, 4)),
}


def _estimate(name: str) -> tuple[object, object]:
    s = CASES[name]["s"]
    cost_model = example(name)
    return cost_model, estimate(cost_model, Strategy(global_batch=1, seq_len=s))


@pytest.mark.parametrize("name", list(CASES))
def test_executed_flops_are_within_five_percent_of_megatron(name: str) -> None:
    _, result = _estimate(name)
    gold = megatron(**CASES[name])
    assert result.flops.total == pytest.approx(gold, rel=0.05)


@pytest.mark.parametrize("name", list(CASES))
def test_model_flops_are_within_one_percent_of_palm(name: str) -> None:
    """PaLM (Chowdhery et al. 2022, appendix B): 6N + 12·L·a·d_h·s per token.

    N: the parameters a token multiplies, output head included, embedding lookup not
    (hpdsl's exact `active` count less the embedding, plus the MTP layer's active part and
    the shared output head its prediction multiplies again);
    L: the softmax-attention layers (MTP included).
    """
    cost_model, result = _estimate(name)
    case = CASES[name]
    report = parameters(cost_model)
    mtp_active = report.mtp
    if case.get("mtp"):
        experts, top_k = 512, case["routed"]
        mtp_active -= (experts - top_k) * 3 * case["h"] * case["ffn"]
        mtp_active += case["h"] * case["vocab"]
    n = report.active - report.embedding + mtp_active
    attention_layers = case["layers"] + case.get("mtp", 0) - (case["linear"][0] if case.get("linear") else 0)
    per_token = 6 * n + 12 * attention_layers * case["a"] * case["d_h"] * case["s"]
    assert result.flops.model_total == pytest.approx(case["s"] * per_token, rel=0.01)


def test_executed_and_model_conventions_differ_by_the_causal_half() -> None:
    """Llama-3-8B at 8k: the executed count sits below the model count (about half the scores skipped)."""
    _, result = _estimate("llama3_8b")
    assert result.flops.total < result.flops.model_total
    no_flash = estimate(example("llama3_8b"), Strategy(global_batch=1, seq_len=8192, flash_attention=False))
    assert no_flash.flops.total > result.flops.total          # the whole square, then masked
    assert no_flash.flops.model_total == result.flops.model_total  # the convention does not move


def test_flash_backward_runs_the_scores_again() -> None:
    _, result = _estimate("llama2_7b")
    assert result.flops.backward > 2 * result.flops.forward
    assert result.flops.recompute == 0
