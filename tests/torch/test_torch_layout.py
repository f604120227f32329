"""Tensor-parallel layouts in the torch backend: verification before sharding, DTensor shards, provenance.

One-process gloo meshes and torch's fake process group (tp 8 in one process);
the real multi-process run (loss and gradients against the unsharded model) is
in test_torch_multiprocess.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard
from torch_support import ROOT, process_group, shrink

from hpdsl.api import compile_sources
from hpdsl.diagnostics import Source
from hpdsl.errors import BuildError
from hpdsl.registry import Registry
from hpdsl.torch import (
    ModuleConfig, build_family, build_model, collect_family_modules, explain_module, get_family_build_info,
    job_context, materialize,
)
from hpdsl.torch.layout import apply_layout
from hpdsl.torch.modules import Attention, GroupedExperts

CFG = ModuleConfig(hidden=32, heads=4, head_dim=8, kv_heads=2, ffn_width=64)

CUSTOM = """
family short_mlp {
  factory "hpdsl.torch.modules:MLP"
  variant gated "hpdsl.torch.modules:GatedMLP" default params(gate_proj, up_proj)
  layout {
    gate_proj.weight (ffn_width, hidden) colwise
    up_proj.weight   (ffn_width, hidden) colwise
  }
}
family biasless_mlp {
  factory "hpdsl.torch.modules:MLP"
  variant gated "hpdsl.torch.modules:GatedMLP" default params(gate_proj, up_proj, down_proj)
  layout {
    gate_proj.weight (ffn_width, hidden) colwise
    up_proj.weight   (ffn_width, hidden) colwise
    down_proj.weight (hidden, ffn_width) rowwise
  }
}
family square_mlp {
  factory "hpdsl.torch.modules:MLP"
  variant gated "hpdsl.torch.modules:GatedMLP" default params(gate_proj, up_proj, down_proj)
  layout {
    gate_proj.weight (ffn_width, hidden)    colwise
    up_proj.weight   (ffn_width, ffn_width) colwise
    down_proj.weight (hidden, ffn_width)    rowwise
  }
}
family sharded_decay {
  factory "hpdsl.torch.modules:GatedDeltaNet"
  variant chunked "hpdsl.torch.modules:ChunkedGatedDeltaNet" default
      params(in_proj_qkvz, in_proj_ba, conv1d, dt_bias, A_log, norm, out_proj)
  layout {
    in_proj_qkvz.weight (2 * key_heads * key_head_dim + 2 * value_heads * value_head_dim, hidden) replicate
    in_proj_ba.weight   (2 * value_heads, hidden) replicate
    conv1d.weight       (2 * key_heads * key_head_dim + value_heads * value_head_dim, 1, conv) replicate
    dt_bias             (value_heads) replicate
    A_log               (value_heads) colwise
    norm.weight         (value_head_dim) replicate
    out_proj.weight     (hidden, value_heads * value_head_dim) replicate
  }
}
"""


@pytest.fixture(scope="module")
def custom_registry() -> Registry:
    """Return the standard library plus the hand-made families above (all of which compile)."""
    return compile_sources([Source("custom.hpf", CUSTOM)])


@pytest.fixture
def tp8():
    """A fake 8-rank job with one tp axis of 8, this process being rank 5."""
    with process_group(8, rank=5, fake=True):
        yield init_device_mesh("cpu", (8,), mesh_dim_names=("tp",))


# --------------------------------------------------------------------------
# Verification at any tp
# --------------------------------------------------------------------------


def test_every_family_of_a_built_model_records_its_logical_shapes(small_registry) -> None:
    built = build_model("tiny_qwen3_next", registry=small_registry)
    boundaries = collect_family_modules(built)
    assert {b.info.resolved.family.name for b in boundaries} == {"attention", "gated_delta_net", "mlp",
                                                                 "grouped_experts", "router", "shared_gate",
                                                                 "norm", "embedding", "output_head"}
    for boundary in boundaries:
        layout = boundary.info.layout
        assert layout is not None and layout.tp == 1
        # Heads, widths and the vocabulary split; the Gated DeltaNet and the experts are replicated over tp.
        assert bool(layout.sharded) == (boundary.info.resolved.family.name in ("attention", "mlp", "embedding",
                                                                               "output_head"))
        actual = {n: tuple(p.shape) for n, p in boundary.module.named_parameters()}
        assert boundary.info.logical_shapes == actual
        assert all(p.local_shape == p.logical_shape for p in layout.parameters)
    q_proj = get_family_build_info(built.layers[3].mixer).layout.parameters[0]  # type: ignore[union-attr]
    assert (q_proj.name, q_proj.placement, q_proj.dim, q_proj.logical_shape) == ("q_proj.weight", "colwise", 0,
                                                                                (128, 64))


def test_a_parameter_the_variant_does_not_declare_is_rejected(custom_registry) -> None:
    with pytest.raises(BuildError, match=r"^ffn: family 'short_mlp' \(variant 'gated'\): parameter "
                                         r"'down_proj.weight' of variant 'gated' is not declared in its "
                                         r"params\(gate_proj, up_proj\)"):
        build_family("short_mlp", config=CFG, registry=custom_registry, module_fqn="ffn")


def test_a_parameter_without_an_entry_is_rejected(custom_registry) -> None:
    build_family("biasless_mlp", config=CFG, registry=custom_registry)
    with pytest.raises(BuildError, match=r"parameter 'gate_proj.bias' of variant 'gated' has no layout entry "
                                         r"\(the layout places down_proj.weight, gate_proj.weight, up_proj.weight\)"):
        build_family("biasless_mlp", config=ModuleConfig(hidden=32, ffn_width=64, mlp_bias=True),
                     registry=custom_registry)


def test_declared_dims_must_be_the_module_shape(custom_registry) -> None:
    with pytest.raises(BuildError, match=r"parameter 'up_proj.weight' has shape \(64, 32\), but the layout "
                                         r"declares \(ffn_width, ffn_width\) = \(64, 64\)"):
        build_family("square_mlp", config=CFG, registry=custom_registry)


def test_a_one_process_gloo_mesh_builds_and_trains_at_tp_1(small_registry, tmp_path) -> None:
    with process_group(1, store_dir=tmp_path):
        mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("tp",))
        built = materialize(build_model("tiny_dense", mesh, registry=small_registry), "cpu", seed=0)
        ids = torch.randint(0, 96, (2, 8))
        F.cross_entropy(built(ids).reshape(-1, 96), ids.reshape(-1)).backward()
        assert not any(isinstance(p, DTensor) for p in built.parameters())
        info = get_family_build_info(built.layers[0].mixer)
        assert info is not None and info.layout is not None and info.layout.tp == 1
        assert info.logical_shapes["o_proj.bias"] == (64,)  # tiny_dense has biases everywhere


# --------------------------------------------------------------------------
# Sharding at tp 8 (fake process group)
# --------------------------------------------------------------------------


def test_tp_8_shards_heads_and_widths_and_records_both_shapes(tp8, examples_registry) -> None:
    model = shrink(examples_registry.model("llama3_8b"), per_group=1, groups=1)
    built = build_model(model, tp8, registry=examples_registry)
    attention, mlp = built.layers[0].mixer, built.layers[0].ffn
    shapes = {p.name: (p.logical_shape, p.local_shape, p.placement)
              for p in get_family_build_info(attention).layout.parameters}  # type: ignore[union-attr]
    assert shapes["q_proj.weight"] == ((4096, 4096), (512, 4096), "colwise")  # 32 heads: 4 per rank
    assert shapes["k_proj.weight"] == ((1024, 4096), (128, 4096), "colwise")  # 8 kv heads: 1 per rank
    assert shapes["o_proj.weight"] == ((4096, 4096), (4096, 512), "rowwise")
    assert isinstance(attention.q_proj.weight, DTensor) and attention.q_proj.weight.placements == (Shard(0),)
    assert isinstance(attention.o_proj.weight, DTensor) and attention.o_proj.weight.placements == (Shard(1),)
    assert attention.tp is not None and (attention.tp.rank, attention.tp.size) == (5, 8)
    mlp_info = get_family_build_info(mlp)
    assert mlp_info is not None and mlp_info.logical_shapes["down_proj.weight"] == (4096, 14336)
    assert tuple(mlp.down_proj.weight.to_local().shape) == (4096, 14336 // 8)
    assert not isinstance(built.layers[0].mixer_norm.weight, DTensor)  # not a family: replicated
    story = explain_module(built, "layers.0.mixer")
    assert story["layout"]["tp"] == 8
    assert story["layout"]["parameters"]["v_proj.weight"]["local_shape"] == [128, 4096]


def _all_reduces(run) -> int:
    """Return the all-reduces `run()` issues (torch's CommDebugMode counts DTensor's collectives)."""
    from torch.distributed.tensor.debug import CommDebugMode

    with CommDebugMode() as comms:
        run()
    return sum(n for op, n in comms.get_comm_counts().items() if "all_reduce" in str(op))


def test_the_colwise_linears_reading_one_input_all_reduce_its_gradient_once(tp8, examples_registry) -> None:
    # Megatron's column-parallel region: q, k and v (gate and up) read one input; its gradient's three
    # (two) shares add up on one replicated DTensor and all-reduce once. A layer: 2 forward, 2 backward.
    model = shrink(examples_registry.model("llama3_8b"), per_group=1, groups=1)
    built = materialize(build_model(model, tp8, registry=examples_registry))
    layer = built.layers[0]
    x = torch.randn(1, 4, 4096, requires_grad=True)
    mlp_out = layer.ffn(x)
    assert _all_reduces(lambda: mlp_out.sum().backward()) == 1  # gate and up: one, not two
    assert _all_reduces(lambda: layer.ffn(x)) == 1  # down_proj's rowwise sum
    ids = torch.randint(0, model.vocab, (1, 4))
    logits = built(ids)
    backward = _all_reduces(lambda: logits.float().sum().backward())
    # attention's q/k/v input and the feed-forward's gate/up input, then the head's colwise input
    assert backward == 3


def test_tp_8_splits_mla_by_heads_and_replicates_its_latents(tp8, examples_registry) -> None:
    model = shrink(examples_registry.model("deepseek_v3"), per_group=1, groups=1)
    mla = build_model(model, tp8, registry=examples_registry).layers[0].mixer
    shapes = {p.name: (p.logical_shape, p.local_shape, p.placement)
              for p in get_family_build_info(mla).layout.parameters}  # type: ignore[union-attr]
    # 128 heads, 16 per rank: 128 no-position + 64 rotary query dims, 128 key + 128 value dims per head.
    assert shapes["q_b_proj.weight"] == ((24576, 1536), (3072, 1536), "colwise")
    assert shapes["kv_b_proj.weight"] == ((32768, 512), (4096, 512), "colwise")
    assert shapes["o_proj.weight"] == ((7168, 16384), (7168, 2048), "rowwise")
    assert shapes["q_a_proj.weight"] == ((1536, 7168), (1536, 7168), "replicate")
    assert shapes["kv_a_proj_with_mqa.weight"] == ((576, 7168), (576, 7168), "replicate")
    assert isinstance(mla.kv_b_proj.weight, DTensor) and mla.kv_b_proj.weight.placements == (Shard(0),)
    assert isinstance(mla.o_proj.weight, DTensor) and mla.o_proj.weight.placements == (Shard(1),)
    assert not any(isinstance(p, DTensor) for p in (mla.q_a_proj.weight, mla.q_a_layernorm.weight,
                                                    mla.kv_a_proj_with_mqa.weight, mla.kv_a_layernorm.weight))
    assert mla.tp is not None and (mla.tp.rank, mla.tp.size) == (5, 8)


def test_tp_8_splits_an_mtp_layers_projection_by_its_layout_and_gathers_its_output(tp8, examples_registry) -> None:
    """families/projection.hpf: eh_proj (hidden, 2 * hidden) colwise; its three norms the norm family's, whole."""
    model = shrink(examples_registry.model("deepseek_v3"), per_group=1, groups=1)
    mtp = build_model(model, tp8, registry=examples_registry, include_mtp=True).mtp[0]
    info = get_family_build_info(mtp.eh_proj)
    assert info is not None and info.resolved.family.name == "mtp_projection"
    (weight,) = info.layout.parameters  # type: ignore[union-attr]
    assert (weight.logical_shape, weight.local_shape, weight.placement) == ((7168, 14336), (896, 14336), "colwise")
    assert isinstance(mtp.eh_proj.weight, DTensor) and mtp.eh_proj.weight.placements == (Shard(0),)
    assert not any(isinstance(n.weight, DTensor) for n in (mtp.enorm, mtp.hnorm, mtp.norm))  # replicate
    norms = [get_family_build_info(n) for n in (mtp.enorm, mtp.hnorm, mtp.norm)]
    assert [n.resolved.family.name for n in norms] == ["norm"] * 3  # type: ignore[union-attr]


def test_indivisible_heads_are_rejected_before_anything_is_sharded(tp8, small_registry) -> None:
    with pytest.raises(BuildError, match=r"^layers\.0\.mixer: family 'attention' \(variant 'local'\): cannot "
                                         r"shard parameter 'q_proj.weight' over tp=8: its dim 0 has size 64 in 4 "
                                         r"blocks \(by heads\), and its 4 blocks do not split evenly over tp=8"):
        build_model("tiny_moe", tp8, registry=small_registry)
    # 8 heads split, 4 kv heads do not: q_proj, checked first, must still be whole.
    cfg = ModuleConfig(hidden=64, heads=8, head_dim=8, kv_heads=4)
    with torch.device("meta"):
        module = Attention(cfg)
    with pytest.raises(BuildError, match=r"'k_proj.weight' over tp=8: its dim 0 has size 32 in 4 blocks"):
        apply_layout(module, small_registry.family("attention"), "local", config=cfg,
                     context=job_context(tp8, None), where="mixer")
    assert not any(isinstance(p, DTensor) for p in module.parameters())


def test_an_indivisible_width_names_the_module_parameter_size_and_tp(tp8, stdlib_registry) -> None:
    with pytest.raises(BuildError, match=r"^layers\.2\.ffn: family 'mlp' \(variant 'gated'\): cannot shard "
                                         r"parameter 'gate_proj.weight' over tp=8: its dim 0 has size 100, and "
                                         r"100 is not a multiple of tp=8"):
        with torch.device("meta"):
            build_family("mlp", config=ModuleConfig(hidden=64, ffn_width=100), mesh=tp8,
                         registry=stdlib_registry, module_fqn="layers.2.ffn")


def test_only_linear_modules_are_sharded(tp8, custom_registry) -> None:
    cfg = ModuleConfig(hidden=64, key_heads=8, key_head_dim=8, value_heads=8, value_head_dim=8,
                       conv=4)
    with pytest.raises(BuildError, match=r"shards only nn\.Linear modules.*the module is a ChunkedGatedDeltaNet "
                                         r"with dt_bias replicate, A_log colwise\(0\)"):
        with torch.device("meta"):
            build_family("sharded_decay", config=cfg, mesh=tp8, registry=custom_registry)


def test_sharding_needs_a_mesh_with_a_tp_axis(stdlib_registry) -> None:
    with pytest.raises(BuildError, match=r"sharding over tp=2 needs the job's DeviceMesh with a 'tp' axis"):
        build_family("mlp", config=CFG, context={"tp_size": 2}, registry=stdlib_registry)
    # A fully replicated layout needs no mesh: every rank holds the whole module.
    experts = build_family("grouped_experts", config=ModuleConfig(hidden=32, ffn_width=16, experts=4),
                           context={"tp_size": 2}, registry=stdlib_registry)
    assert get_family_build_info(experts).layout.sharded == ()  # type: ignore[union-attr]


def test_a_replacement_is_laid_out_from_its_own_parameters(stdlib_registry) -> None:
    source = GroupedExperts(ModuleConfig(hidden=32, ffn_width=16, experts=4))
    replaced = build_family("grouped_experts", module=source, registry=stdlib_registry)
    info = get_family_build_info(replaced)
    assert info is not None and info.config is None  # no config: dims cannot be evaluated, coverage still is
    assert info.logical_shapes == {"gate_up_proj": (4, 32, 32), "down_proj": (4, 16, 32)}


def test_explain_on_the_command_line_shows_the_layout() -> None:
    run = subprocess.run([sys.executable, "-m", "hpdsl.cli", "explain", "examples/llama3_8b.hpf", "--path",
                          "layers.1.mixer", "--tp", "8", "--json"], cwd=ROOT, capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stderr
    parameters = json.loads(run.stdout)["layout"]["parameters"]
    assert parameters["q_proj.weight"]["logical_shape"] == [4096, 4096]
    assert parameters["q_proj.weight"]["local_shape"] == [512, 4096]
