"""Large meshes in one process (torch's fake process group): resolution and building for 64 ranks."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch_support import process_group

from hpdsl.errors import BuildError, ResolutionError
from hpdsl.torch import (
    AxisSizes, FamilyRequest, JobMesh, build_family, build_model, collect_family_modules, explain_module,
    resolve_family, validate_family_context,
)
from hpdsl.torch.modules import (Attention, ExpertParallelExperts, GatedDeltaNet, GroupedExperts, MXFP8GroupedExperts,
                                 RingAttention, RingMLAttention)


@pytest.fixture
def mesh64():
    """A fake 64-rank job: tp 2 × cp 8 × ep 4, this process being rank 37 (tp 1, cp 1, ep 1)."""
    with process_group(64, rank=37, fake=True):
        yield init_device_mesh("cpu", (2, 8, 4), mesh_dim_names=("tp", "cp", "ep"))


def test_resolution_reads_the_mesh(mesh64, stdlib_registry) -> None:
    attention = resolve_family(FamilyRequest(stdlib_registry.family("attention")), mesh=mesh64)
    assert attention.variant.name == "ring" and attention.axis_sizes == AxisSizes(tp=2, cp=8, ep=4)
    experts = resolve_family(FamilyRequest(stdlib_registry.family("grouped_experts")), mesh=mesh64)
    assert experts.variant.name == "ep"
    with pytest.raises(ResolutionError, match=r"layers\.1\.ffn\.experts: .*MXFP8 experts require TP=CP=PP=1"):
        resolve_family(FamilyRequest(stdlib_registry.family("grouped_experts"), {"use_mxfp8": True}),
                       mesh=mesh64, module_fqn="layers.1.ffn.experts")


def test_a_model_built_for_the_mesh_uses_the_parallel_variants(mesh64, small_registry) -> None:
    built = build_model("tiny_moe", mesh64, registry=small_registry)
    layer = built.layers[0]
    assert type(layer.mixer) is RingAttention and layer.mixer.cp == 8
    experts = layer.ffn.experts
    assert type(experts) is ExpertParallelExperts
    # Rank 37 is (tp 1, cp 1, ep 1): it holds experts 2 and 3 of 8.
    assert (experts.ep, experts.ep_rank, experts.first, experts.local) == (4, 1, 2, 2)
    assert tuple(experts.gate_up_proj.shape) == (2, 64, 64)
    assert built.cp_rank == 1
    story = explain_module(built, "layers.1.ffn.experts")
    assert story["variant"] == "ep" and story["clause"] == "when (parallel or etp > 1) and not use_mxfp8"
    assert story["mesh"]["ep"] == 4 and story["parallel"] is True
    validate_family_context(built, mesh=mesh64)


def test_validation_rejects_a_model_built_for_another_job(mesh64, small_registry) -> None:
    local = build_model("tiny_moe", registry=small_registry)
    assert type(local.layers[0].mixer) is Attention and type(local.layers[0].ffn.experts) is GroupedExperts
    with pytest.raises(BuildError, match=r"embed: family 'embedding' was laid out for tp=1, but the job has tp=2"):
        validate_family_context(local, mesh=mesh64)
    with pytest.raises(BuildError, match=r"layers\.0\.mixer: family 'attention' was built for cp=1, but the job has cp=8"):
        validate_family_context(local, {"cp_size": 8})
    other = init_device_mesh("cpu", (2, 8, 4), mesh_dim_names=("tp", "cp", "ep"))
    built = build_model("tiny_moe", mesh64, registry=small_registry)
    with pytest.raises(BuildError, match="was built on another job's mesh"):
        validate_family_context(built, mesh=other)


def test_mla_and_gated_deltanet_take_their_context_parallel_forms(mesh64, small_registry) -> None:
    """cp 8: MLA resolves to its ring variant, Gated DeltaNet passes its state over the cp ranks."""
    qwen = build_model("tiny_qwen3_next", mesh64, registry=small_registry)
    linear = qwen.layers[0].mixer
    assert isinstance(linear, GatedDeltaNet) and linear.cp == 8 and linear.job is not None
    deepseek = build_model("tiny_deepseek_v3", mesh64, registry=small_registry)
    assert type(deepseek.layers[0].mixer) is RingMLAttention and deepseek.layers[0].mixer.cp == 8


def test_expert_parallel_needs_the_experts_to_split_evenly(small_registry) -> None:
    with process_group(64, rank=0, fake=True):
        mesh = init_device_mesh("cpu", (2, 32), mesh_dim_names=("tp", "ep"))
        with pytest.raises(BuildError, match=r"layers\.0\.ffn\.experts: ExpertParallelExperts: 8 experts cannot be split evenly over ep=32"):
            build_model("tiny_moe", mesh, registry=small_registry)


def test_ep_comes_from_the_expert_mesh(small_registry) -> None:
    with process_group(64, rank=9, fake=True):
        dense = init_device_mesh("cpu", (32, 2), mesh_dim_names=("dp", "tp"))
        experts = init_device_mesh("cpu", (8, 8), mesh_dim_names=("ep", "etp"))
        built = build_model("tiny_moe", dense, expert_mesh=experts, registry=small_registry)
        module = built.layers[0].ffn.experts
        assert type(module) is ExpertParallelExperts and (module.ep, module.local) == (8, 1)
        assert type(built.layers[0].mixer) is Attention


def test_mxfp8_experts_at_ep_2(small_registry, stdlib_registry) -> None:
    with process_group(64, rank=3, fake=True):
        mesh = init_device_mesh("cpu", (32, 2), mesh_dim_names=("dp", "ep"))
        from hpdsl.torch import ModuleConfig

        module = build_family("grouped_experts", config=ModuleConfig(hidden=64, ffn_width=32, experts=8),
                              mesh=mesh, registry=stdlib_registry, use_mxfp8=True)
        assert type(module) is MXFP8GroupedExperts and module.local == 4 and module.ep_rank == 1


def test_meta_build_on_a_large_mesh_is_cheap(mesh64, examples_registry) -> None:
    from torch_support import shrink

    model = shrink(examples_registry.model("qwen3_30b_a3b"))
    built = build_model(model, JobMesh(mesh64), registry=examples_registry)
    assert all(p.is_meta for p in built.parameters())
    # per layer: two norms, the mixer, the router and the experts; then the embedding, the final norm and the head
    assert len(collect_family_modules(built)) == 5 * len(built.layers) + 3
    assert built.layers[0].ffn.experts.local == 128 // 4
    assert isinstance(built.layers[0].ffn.experts.gate_up_proj, torch.nn.Parameter)


def test_a_full_width_qk_norm_is_refused_under_tp(tmp_path) -> None:
    from hpdsl.api import compile_paths

    path = tmp_path / "olmoe_small.hpf"
    path.write_text("model olmoe_small : olmoe {\n  hidden 64  layers 1  heads 4  kv_heads 4  vocab 32  ffn_width 32\n"
                    "  qk_norm true  qk_norm_full true\n  moe { experts 4  top_k 2  expert_width 32 }\n}\n")
    registry = compile_paths([path])
    with process_group(2, rank=0, fake=True):
        mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
        with pytest.raises(ResolutionError, match=r"layers\.0\.mixer: family 'attention': a full-width QK-norm "
                                                  r"\(qk_norm_full\).*use tp = 1 \(declared at .*attention\.hpf:"):
            build_model("olmoe_small", mesh, registry=registry)
