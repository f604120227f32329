"""transformers' Llama and Mixtral, measured, against `--impl hf-sdpa` and `--impl hf-eager` (docs/validation.md).

bench/validate_hf.py builds each scaled config with transformers, runs it forward
once in bf16 on CPU with labels, and sets FlopCounterMode's matmul FLOPs and the
bytes autograd saves (saved_tensors_hooks) beside hpdsl's estimate of the same
config imported with hpdsl.importers.hf.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from validate_hf import compare  # noqa: E402  (bench/, put on the path by tests/torch/conftest.py)


@pytest.mark.parametrize("arch", ["llama", "mixtral"])
def test_transformers_model_matches_the_estimate(arch: str) -> None:
    rows = compare(arch, batch=2, seq_len=64)
    assert {r.impl for r in rows} == {"hf-sdpa", "hf-eager"}
    flops = [r for r in rows if r.quantity == "forward matmul FLOPs"]
    assert flops and all(r.measured == r.estimated > 0 for r in flops), flops
    layers = [r for r in rows if r.quantity == "saved bytes" and r.part != "output"]
    assert len(layers) == 2 and all(abs(r.relative) <= 0.03 for r in layers), layers
    output = [r for r in rows if r.part == "output"]
    assert len(output) == 2 and all(abs(r.relative) <= 0.05 for r in output), output
    sdpa, eager = (next(r.measured for r in layers if r.impl == i) for i in ("hf-sdpa", "hf-eager"))
    assert eager > sdpa  # eager keeps the scores: the estimate is not the same number twice


def test_fused_is_what_transformers_keeps_less_its_extra_copies() -> None:
    from hpdsl.cost.strategy import Strategy
    from validate_hf import CONFIGS, estimated_bytes, hpdsl_cost_model

    cost = hpdsl_cost_model("llama", CONFIGS["llama"][0])
    fused, sdpa, eager = (estimated_bytes(cost, impl, 2, 64)["layer"]
                          for impl in ("fused", "hf-sdpa", "hf-eager"))
    tokens, h, w = 128, 256, 512
    # Two norms: the normalised bf16 copy and the fp32 root; the SwiGLU's act(gate).
    assert sdpa - fused == tokens * (2 * (2 * h + 4) + 2 * w)
    # Eager: K and V expanded from 2 to 4 heads of 64, the fp32 softmax and its bf16 copy
    # (4 heads × 64 keys) in place of the flash row statistics.
    assert eager - sdpa == tokens * (2 * 2 * 64 * 2 + 4 * 64 * (4 + 2) - 4 * 4)
    assert Strategy().impl == "fused"


def test_fla_chunk_is_the_priced_chunk() -> None:
    from hpdsl.cost.flops import LINEAR_CHUNK
    from hpdsl.cost.impl_terms import FLA_CHUNK

    assert FLA_CHUNK == LINEAR_CHUNK
