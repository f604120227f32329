"""build_family, provenance, collect_family_modules and validate_family_context."""

from __future__ import annotations

import copy

import attrs
import pytest
import torch
from torch import nn

from hpdsl.errors import BuildError, ResolutionError
from hpdsl.ir.nodes import FamilyIR, SelectorIR, VariantIR
from hpdsl.torch import (
    AxisSizes, FamilyRequest, JobContext, ModuleConfig, build_family, collect_family_modules,
    get_family_build_info, materialize, validate_family_context,
)
from hpdsl.torch.modules import (
    Attention, EagerGatedDeltaNet, Embedding, GatedMLP, GroupedExperts, LayerNorm, MLP, MXFP8GroupedExperts,
    OutputHead, PlainMLP, RMSNorm,
)

CFG = ModuleConfig(hidden=32, heads=4, head_dim=8, kv_heads=2, ffn_width=64, experts=4, top_k=2,
                   key_heads=2, key_head_dim=8, value_heads=4, value_head_dim=8, conv=4)
FIXTURES = ("torch_fixture_modules.",)


def custom(path: str, **variant) -> FamilyIR:
    return FamilyIR("custom", path, None, (SelectorIR("level", "int", 0, low=0, high=9),), (),
                    (VariantIR("only", path, default=True, **variant),))


def test_a_direct_build_carries_its_provenance(stdlib_registry) -> None:
    module = build_family("mlp", config=CFG, registry=stdlib_registry, module_fqn="layers.0.ffn")
    assert type(module) is GatedMLP
    info = get_family_build_info(module)
    assert info is not None
    assert (info.origin, info.module_fqn, info.resolved.variant.name) == ("direct", "layers.0.ffn", "gated")
    assert info.request.family.name == "mlp" and info.request.arguments == {}
    assert info.config == CFG
    assert info.source is not None and info.source.file.endswith("families/mlp.hpf")
    assert info.variant_source is not None and info.variant_source.line > info.source.line


def test_a_bare_registry_ir_is_refused_with_how_to_wrap_it(stdlib_registry) -> None:
    with pytest.raises(BuildError, match=r"registry must be an hpdsl.Registry .* found RegistryIR"):
        build_family("mlp", config=CFG, registry=stdlib_registry.ir)


def test_norm_embedding_and_output_head_families_build_from_a_config(stdlib_registry) -> None:
    config = attrs.evolve(CFG, vocab=50, norm_bias=True, norm_eps=1e-5)
    rms = build_family("norm", config=config, registry=stdlib_registry, module_fqn="norm")
    assert type(rms) is RMSNorm and rms.eps == 1e-5
    assert {n: tuple(p.shape) for n, p in rms.named_parameters()} == {"weight": (32,), "bias": (32,)}
    layer = build_family("norm", config=attrs.evolve(config, norm_bias=False), registry=stdlib_registry,
                         norm="layernorm")
    assert type(layer) is LayerNorm and layer.bias is None and layer.normalized_shape == (32,)
    info = get_family_build_info(layer)
    assert info is not None and info.resolved.variant.name == "layernorm"
    assert info.logical_shapes == {"weight": (32,)}
    x = torch.randn(3, 32)
    torch.testing.assert_close(layer(x), torch.nn.functional.layer_norm(x, (32,), layer.weight, eps=1e-5))
    embed = build_family("embedding", config=config, registry=stdlib_registry)
    assert type(embed) is Embedding and tuple(embed.weight.shape) == (50, 32)
    assert embed(torch.tensor([[0, 49]])).shape == (1, 2, 32)
    head = build_family("output_head", config=config, registry=stdlib_registry)
    assert type(head) is OutputHead and head.bias is None and tuple(head.weight.shape) == (50, 32)
    assert get_family_build_info(head).logical_shapes == {"weight": (50, 32)}  # type: ignore[union-attr]
    assert head(torch.randn(2, 32)).shape == (2, 50)


def test_vocabulary_ends_need_a_vocab_and_norms_keep_their_plain_signature(stdlib_registry) -> None:
    with pytest.raises(BuildError, match="positive vocab"):
        build_family("embedding", config=CFG, registry=stdlib_registry)
    assert RMSNorm(8).eps == 1e-6 and RMSNorm(8).bias is None
    plain = LayerNorm(8)
    assert plain.eps == 1e-5 and plain.bias is not None
    with pytest.raises(TypeError, match="`dim` or a `config`"):
        RMSNorm()


def test_the_config_is_copied_not_shared(stdlib_registry) -> None:
    config = {"hidden": 8}
    module = build_family(custom("torch_fixture_modules:Plain"), config=config, allowed_prefixes=FIXTURES)
    config["hidden"] = 9
    info = get_family_build_info(module)
    assert info is not None and info.config == {"hidden": 8}
    assert module.config == {"hidden": 8} and module.config is not info.config


def test_selectors_pick_the_variant_and_reach_only_constructors_naming_them(stdlib_registry) -> None:
    plain = build_family("mlp", config=CFG, registry=stdlib_registry, mlp="plain")
    assert type(plain) is PlainMLP and plain.gate_proj is None
    eager = build_family("attention", config=CFG, registry=stdlib_registry, backend="eager", layer_index=2)
    assert type(eager) is Attention and eager.backend == "eager" and eager.layer_index == 2
    gdn = build_family("gated_delta_net", config=CFG, registry=stdlib_registry, backend="eager")
    assert type(gdn) is EagerGatedDeltaNet


def test_targets_by_factory_class_and_factory_path(stdlib_registry) -> None:
    assert type(build_family(MLP, config=CFG, registry=stdlib_registry)) is GatedMLP
    by_path = build_family("hpdsl.torch.modules:GroupedExperts", config=CFG, registry=stdlib_registry)
    assert type(by_path) is GroupedExperts
    with pytest.raises(ResolutionError, match="must be the factory of exactly one family .* none"):
        build_family(GatedMLP, config=CFG, registry=stdlib_registry)
    with pytest.raises(ResolutionError, match="has no family 'attentoin'; did you mean 'attention'"):
        build_family("attentoin", config=CFG, registry=stdlib_registry)
    with pytest.raises(ResolutionError, match="a family target is a name"):
        build_family(3, config=CFG, registry=stdlib_registry)  # type: ignore[arg-type]


def test_a_request_cannot_be_combined_with_keywords(stdlib_registry) -> None:
    req = FamilyRequest(stdlib_registry.family("grouped_experts"), {"use_mxfp8": False})
    assert type(build_family(req, config=CFG)) is GroupedExperts
    with pytest.raises(ResolutionError, match="cannot be combined with more keywords"):
        build_family(req, config=CFG, use_mxfp8=True)


def test_exactly_one_of_config_and_module(stdlib_registry) -> None:
    with pytest.raises(BuildError, match=r"layers\.1\.ffn: family 'mlp' needs exactly one .* found neither"):
        build_family("mlp", registry=stdlib_registry, module_fqn="layers.1.ffn")
    with pytest.raises(BuildError, match="found both"):
        build_family("mlp", config=CFG, module=nn.Linear(2, 2), registry=stdlib_registry)


def test_a_replacement_needs_a_constructor_naming_module(stdlib_registry) -> None:
    with pytest.raises(BuildError, match="GatedMLP must explicitly accept 'module' for a replacement"):
        build_family("mlp", module=nn.Linear(2, 2), registry=stdlib_registry)


def test_grouped_experts_replace_a_transformers_experts_module(stdlib_registry) -> None:
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts

    config = transformers.Qwen3MoeConfig(hidden_size=32, moe_intermediate_size=16, num_experts=4)
    source = Qwen3MoeExperts(config)
    nn.init.normal_(source.gate_up_proj)
    nn.init.normal_(source.down_proj)
    source.eval()
    replaced = build_family("grouped_experts", module=source, registry=stdlib_registry, module_fqn="mlp.experts")
    info = get_family_build_info(replaced)
    assert info is not None and info.origin == "replacement" and not replaced.training
    x = torch.randn(5, 32)
    indices, weights = torch.tensor([[0, 1], [2, 3], [1, 0], [3, 3], [2, 0]]), torch.rand(5, 2)
    torch.testing.assert_close(replaced(x, indices, weights), source(x, indices, weights), rtol=1e-4, atol=1e-4)


def test_a_replacement_in_our_layout_aliases_the_parameters(stdlib_registry) -> None:
    source = GroupedExperts(CFG)
    replaced = build_family("grouped_experts", module=source, registry=stdlib_registry)
    assert replaced.gate_up_proj is source.gate_up_proj and replaced.down_proj is source.down_proj


def test_replacement_errors_name_the_module(stdlib_registry) -> None:
    bad = nn.Module()
    bad.gate_up_proj = nn.Parameter(torch.zeros(2, 4, 6))
    with pytest.raises(BuildError, match=r"^moe\.experts: GroupedExperts: the source module's 'down_proj' must be a Parameter, found none"):
        build_family("grouped_experts", module=bad, registry=stdlib_registry, module_fqn="moe.experts")
    bad.down_proj = nn.Parameter(torch.zeros(2, 5, 4))
    with pytest.raises(BuildError, match="incompatible source shapes"):
        build_family("grouped_experts", module=bad, registry=stdlib_registry)


def test_constructor_failures_and_non_modules_are_build_errors() -> None:
    with pytest.raises(BuildError, match=r"^l\.0: family 'custom': Failing failed: this config is no good"):
        build_family(custom("torch_fixture_modules:Failing"), config=1, module_fqn="l.0",
                     allowed_prefixes=FIXTURES)
    # A factory that is not an nn.Module class is refused before it is called (docs/trust.md).
    with pytest.raises(ResolutionError, match="'not_a_module' is a function, not a torch nn.Module class"):
        build_family(custom("torch_fixture_modules:not_a_module"), config=1, allowed_prefixes=FIXTURES)


def test_runtime_arguments_reach_only_constructors_naming_them() -> None:
    plain = build_family(custom("torch_fixture_modules:Plain"), config=1, module_fqn="a.b",
                         context={"tp_size": 2}, allowed_prefixes=FIXTURES, level=4)
    assert plain.config == 1 and not hasattr(plain, "module_fqn")
    full = build_family(custom("torch_fixture_modules:Everything"), config=1, module_fqn="a.b",
                        context={"tp_size": 2}, allowed_prefixes=FIXTURES, level=4)
    assert (full.module_fqn, full.context.size("tp"), full.context.active("tp"), full.level) == ("a.b", 2, True, 4)
    assert full.context == JobContext(AxisSizes(tp=2))


def test_mxfp8_experts_check_their_job_and_shapes(stdlib_registry) -> None:
    cfg = ModuleConfig(hidden=64, ffn_width=32, experts=4, top_k=2)
    experts = build_family("grouped_experts", config=cfg, registry=stdlib_registry, use_mxfp8=True)
    assert type(experts) is MXFP8GroupedExperts
    with pytest.raises(BuildError, match=r"MXFP8GroupedExperts needs hidden \(32\) and expert width \(64\) divisible by 32|divisible by 32"):
        build_family("grouped_experts", config=ModuleConfig(hidden=48, ffn_width=32, experts=4),
                     registry=stdlib_registry, use_mxfp8=True)
    with pytest.raises(BuildError, match="requires a standard bias-free SwiGLU"):
        build_family("grouped_experts", config=ModuleConfig(hidden=64, ffn_width=32, experts=4, gated=False),
                     registry=stdlib_registry, use_mxfp8=True)


def test_meta_construction_then_materialisation(stdlib_registry) -> None:
    with torch.device("meta"):
        module = build_family("attention", config=CFG, registry=stdlib_registry)
    assert all(p.is_meta for p in module.parameters())
    materialize(module, "cpu", seed=0)
    assert not any(p.is_meta for p in module.parameters())
    assert module(torch.randn(2, 5, 32)).shape == (2, 5, 32)


# --------------------------------------------------------------------------
# Finding built families and checking them against a job
# --------------------------------------------------------------------------


def test_collect_finds_families_by_identity_with_aliases_and_the_root(stdlib_registry) -> None:
    shared = build_family("mlp", config=CFG, registry=stdlib_registry)
    root = build_family(custom("torch_fixture_modules:Everything"), config=1, allowed_prefixes=FIXTURES)
    root.first = shared
    root.second = shared
    root.inner = nn.Sequential(nn.Linear(2, 2), shared)
    root.other = build_family("attention", config=CFG, registry=stdlib_registry)
    found = {b.info.request.family.name: b for b in collect_family_modules(root)}
    assert set(found) == {"custom", "mlp", "attention"}
    assert found["custom"].fqns == ("",)
    assert found["mlp"].fqns == ("first", "second", "inner.1")
    assert found["mlp"].module is shared
    plain = nn.Sequential(nn.Linear(2, 2))
    assert collect_family_modules(plain) == ()


def test_provenance_survives_a_deepcopy(stdlib_registry) -> None:
    module = build_family("mlp", config=CFG, registry=stdlib_registry)
    clone = copy.deepcopy(module)
    assert get_family_build_info(clone) is get_family_build_info(module)


def test_validate_family_context_rejects_models_built_for_other_jobs(stdlib_registry) -> None:
    model = nn.ModuleDict({
        "mixer": build_family("attention", config=CFG, registry=stdlib_registry, module_fqn="mixer"),
        "experts": build_family("grouped_experts", config=ModuleConfig(hidden=64, ffn_width=32, experts=4),
                                registry=stdlib_registry, use_mxfp8=True, module_fqn="experts"),
    })
    validate_family_context(model, {"tp_size": 1})
    validate_family_context(model, {"dp_size": 8})  # an axis no family reads
    # ep changes the experts' compute, not the attention's: only the experts are named.
    with pytest.raises(BuildError, match="mixer: family 'attention' was built for cp=1, but the job has cp=2"):
        validate_family_context(model, {"cp_size": 2})
    with pytest.raises(BuildError, match="experts: family 'grouped_experts' was built for ep=1, but the job has ep=2"):
        validate_family_context(model, {"ep_size": 2})
    # The attention's heads are split over tp; the experts are replicated, so tp only matters to mxfp8's rule.
    with pytest.raises(BuildError, match="mixer: family 'attention' was laid out for tp=1, but the job has tp=2"):
        validate_family_context(model, {"tp_size": 2})
    with pytest.raises(BuildError, match="MXFP8 experts require TP=CP=PP=1 .*built as variant 'mxfp8'"):
        validate_family_context(model["experts"], {"tp_size": 2})


def test_errors_a_constructor_raises_without_the_path_get_it(stdlib_registry) -> None:
    cfg = ModuleConfig(hidden=8, ffn_width=8, activation="swish")
    with pytest.raises(BuildError, match=r"^layers\.4\.ffn: family 'mlp': unknown activation 'swish'"):
        build_family("mlp", config=cfg, registry=stdlib_registry, module_fqn="layers.4.ffn")
