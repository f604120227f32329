"""transformers' models, measured, against `--impl hf-sdpa-cpu` and `--impl hf-eager` (docs/validation.md).

bench/validate_hf.py builds each scaled config with transformers, runs it forward
once in bf16 on CPU with labels, and sets FlopCounterMode's matmul FLOPs and the
bytes autograd saves (saved_tensors_hooks) beside hpdsl's estimate of the same
config imported with hpdsl.importers.hf. Llama-2-7B and Mixtral-8x7B at full size (32 layers,
s 4096, micro-batch 1) run under FakeTensorMode: shapes only, seconds.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from validate_hf import compare  # noqa: E402  (bench/, put on the path by tests/torch/conftest.py)


KINDS = {"llama": 1, "qwen2": 1, "mixtral": 1, "qwen3_moe": 1, "deepseek_v3": 2, "t5": 2}
"""Every architecture the issue bounds, with its layer kinds (Qwen3-Next's linear attention runs
transformers' torch fallback without FLA: not held, docs/validation.md)."""


@pytest.mark.parametrize("arch", list(KINDS))
def test_transformers_model_matches_the_estimate(arch: str) -> None:
    rows = compare(arch, batch=2, seq_len=64)
    assert {r.impl for r in rows} == {"hf-sdpa-cpu", "hf-eager"}
    flops = [r for r in rows if r.quantity == "forward matmul FLOPs"]
    assert flops and all(r.measured == r.estimated > 0 for r in flops), flops
    layers = [r for r in rows if r.quantity == "saved bytes" and r.part != "output"]
    assert len(layers) == 2 * KINDS[arch] and all(abs(r.relative) <= 0.03 for r in layers), layers
    output = [r for r in rows if r.part == "output"]
    assert len(output) == 2 and all(abs(r.relative) <= 0.05 for r in output), output
    for part in {r.part for r in layers}:  # eager and SDPA keep different things: not one number twice
        sdpa, eager = (next(r.estimated for r in layers if r.part == part and r.impl == i)
                       for i in ("hf-sdpa-cpu", "hf-eager"))
        assert sdpa != eager


def test_sdpa_on_a_gpu_is_fused_where_the_cpu_runs_its_math_kernel() -> None:
    from validate_hf import CONFIGS, estimated_bytes, hpdsl_cost_model

    tokens, heads, s = 128, 4, 64
    for arch, kind, qkv in (("t5", "encoder", 3 * 256), ("deepseek_v3", "dense", 4 * (96 + 96 + 64)),
                            ("llama", "layer", 0)):
        cost = hpdsl_cost_model(arch, CONFIGS[arch][0])
        gpu, cpu = (estimated_bytes(cost, impl, 2, s)[kind] for impl in ("hf-sdpa", "hf-sdpa-cpu"))
        # q, k and v upcast to fp32 (2 more bytes each) and the fp32 softmax, less flash's
        # fp32 row statistics; Llama's equal head sizes and no bias run CPU flash.
        math = tokens * (2 * qkv + heads * (4 * s - 4)) if qkv else 0
        assert cpu - gpu == math, (arch, cpu, gpu)


def test_fused_is_what_transformers_keeps_less_its_extra_copies() -> None:
    from hpdsl.model.strategy import Strategy
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
    from hpdsl.cost.formulas.flops import LINEAR_CHUNK
    from hpdsl.cost.facts.impl_terms import FLA_CHUNK

    assert FLA_CHUNK == LINEAR_CHUNK


@pytest.mark.parametrize("arch", ["llama2_7b", "mixtral_8x7b"])
def test_full_size_layers_match_the_estimate_under_fake_tensors(arch: str) -> None:
    # Full width, s 4096, micro-batch 1, bf16: shapes only (FakeTensorMode), so seconds on a CPU.
    rows = compare(arch, batch=1, seq_len=4096)
    flops = [r for r in rows if r.quantity == "forward matmul FLOPs"]
    assert len(flops) == 4 and all(r.measured == r.estimated > 1e12 for r in flops), flops
    layers = [r for r in rows if r.quantity == "saved bytes" and r.part != "output"]
    assert len(layers) == 2 and all(abs(r.relative) <= 0.03 for r in layers), layers
    output = [r for r in rows if r.part == "output"]
    assert len(output) == 2 and all(abs(r.relative) <= 0.05 for r in output), output
    # The CPU dispatcher picks flash for fake CPU tensors as for real ones (equal head sizes, no mask).
    assert [r.note for r in layers if r.impl == "hf-sdpa-cpu"] == ["CPU SDPA: flash (fake)"]
    # Eager keeps the s×s scores of 32 heads (fp32 softmax and its bf16 copy), not flash's fp32
    # row statistics: 3 GiB more at s 4096 (Mixtral's repeat_kv copies on top).
    sdpa, eager = (next(r.measured for r in layers if r.impl == i) for i in ("hf-sdpa-cpu", "hf-eager"))
    assert eager - sdpa >= 32 * 4096 * (4096 * (4 + 2) - 4)
    assert (eager - sdpa == 32 * 4096 * (4096 * (4 + 2) - 4)) == (arch == "llama2_7b")


def test_fake_tensors_are_deduplicated_by_storage_not_address() -> None:
    import torch
    from hf_measure import storage_key
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a, b = torch.empty(4, 8), torch.empty(4, 8)
        assert storage_key(a) == storage_key(a.view(8, 4)) == storage_key(a[1:]) != storage_key(b)
