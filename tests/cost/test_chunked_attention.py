"""Chunked attention (Llama 4's rotary layers) priced by its chunks: executed FLOPs, the model convention, cp.

A Llama-4-shaped model (two rotary layers attending within chunks of c positions, two without
positions attending to the whole prefix) is estimated beside the same model without chunks: every
difference is the chunked layers' score work, and it must be what docs/cost-model.md#chunked-attention
says: each query sees its own chunk's keys up to itself.
"""

from __future__ import annotations

import pytest
from cost_builders import bound
from hypothesis import given, strategies as st

from hpdsl.bound.bind import CostModel
from hpdsl.cost.estimate import estimate
from hpdsl.cost.formulas.flops import HEAD_CAST, SOFTMAX, chunked_keys
from hpdsl.model.strategy import Strategy

H, A, KV, D, FFN, V = 256, 8, 2, 32, 128, 1000
SEQ = 4096

SPEC = """model chunked : llama4 {{
  hidden {h}
  layers 4
  heads {a}
  kv_heads {kv}
  head_dim {d}
  vocab {v}
  ffn_width {ffn}
  {chunk}
  stack {stack}
}}
"""


def model(chunk: int | None, stack: str = "[rope_attention * 2, nope_attention * 2]") -> CostModel:
    """Return the bound model whose rotary layers attend within chunks of `chunk` (None: no chunks)."""
    stated = f"attention_chunk {chunk}" if chunk else ""
    return bound(SPEC.format(h=H, a=A, kv=KV, d=D, v=V, ffn=FFN, chunk=stated, stack=stack), "chunked")


def run(cost_model: CostModel, *, flash: bool = True, cp: int = 1, seq: int = SEQ) -> dict[str, float]:
    """Return the estimate's FLOPs and ring traffic for one sequence of `seq` tokens."""
    est = estimate(cost_model, Strategy(cp=cp, seq_len=seq, flash_attention=flash))
    return {"forward": est.flops.forward, "model": est.flops.model_total, "device": est.flops.per_device,
            "cp": est.communication["cp"]}


def score_per_key() -> float:
    """Return one layer's forward score FLOPs per query and key: QKᵀ, A·V, softmax, the score cast."""
    return A * (4 * D) + A * (SOFTMAX + HEAD_CAST)


@given(st.integers(1, 10_000), st.integers(1, 10_000))
def test_the_keys_are_the_causal_area_of_each_chunk(seq: int, chunk: int) -> None:
    # Query i sees (i mod c) + 1 keys: n·c(c+1)/2 + r(r+1)/2 in all (n whole chunks, r left); the
    # continuous area, n·c²/2 + r²/2, is to it what s²/2 is to the causal s(s+1)/2.
    whole, rest = divmod(seq, chunk)
    assert sum(i % chunk + 1 for i in range(seq)) == whole * chunk * (chunk + 1) // 2 + rest * (rest + 1) // 2
    assert chunked_keys(float(seq), chunk) * seq == pytest.approx(whole * chunk * chunk / 2 + rest * rest / 2)
    if chunk >= seq:
        assert chunked_keys(float(seq), chunk) == pytest.approx(seq / 2)  # one chunk: causal attention


def test_flash_runs_each_chunks_square_and_eager_the_whole_one() -> None:
    c = 1000  # 4 whole chunks and 96 positions
    chunked, whole = model(c), model(None)
    fewer = run(whole)["forward"] - run(chunked)["forward"]
    per_query = SEQ / 2 - chunked_keys(float(SEQ), c)  # keys fewer per query, in each of two chunked layers
    assert fewer == pytest.approx(2 * SEQ * per_query * score_per_key(), rel=1e-12)
    assert run(chunked, flash=False)["forward"] == run(whole, flash=False)["forward"]
    # Within one chunk, chunked attention is causal attention.
    assert run(model(SEQ))["forward"] == run(whole)["forward"]


def test_the_model_convention_counts_a_chunk_of_keys() -> None:
    c = 1024
    fewer = run(model(None))["model"] - run(model(c))["model"]
    # 3 × (QKᵀ + A·V, 2·a·d_h each) per query over s − c keys fewer, in two chunked layers.
    assert fewer == pytest.approx(3 * 2 * SEQ * (SEQ - c) * A * 4 * D, rel=1e-12)


def test_the_chunked_layers_scale_linearly_past_their_chunk() -> None:
    """Twice the sequence, twice the chunked layers' work: a model of rotary layers only is linear in s."""
    rotary = model(512, stack="[rope_attention * 4]")
    assert run(rotary, seq=2048)["forward"] == pytest.approx(2 * run(rotary, seq=1024)["forward"], rel=1e-12)


def test_context_parallel_ranks_reach_a_chunk_back() -> None:
    c = 128  # cp 8: chunks of 4096/16 = 256 positions; a chunk of 128 reaches one cp chunk back at most
    chunked, whole = model(c), model(None)
    kv_bytes = 2 * (2 * KV * D) * SEQ / 8  # bf16 keys and values of one rank's chunk, per layer
    # Forward + backward (3 passes) in the two chunked layers: two ring neighbours instead of all 7 other ranks.
    assert run(whole, cp=8)["cp"] - run(chunked, cp=8)["cp"] == pytest.approx(3 * 2 * kv_bytes * (7 - 2), rel=1e-12)


@pytest.mark.parametrize("cp,flash", [(1, True), (1, False), (4, True)])
def test_floats_and_grid_price_the_chunks_alike(cp: int, flash: bool) -> None:
    from hpdsl.cost.estimate import grid_estimate

    cost_model = model(1000)
    strategy = Strategy(cp=cp, seq_len=SEQ, flash_attention=flash)
    assert estimate(cost_model, strategy).to_json() == grid_estimate(cost_model, strategy).to_json()
