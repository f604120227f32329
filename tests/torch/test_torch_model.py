"""build_model: parameters equal the estimator's exactly; layers are built through their families."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import torch
from torch_support import examples_registry, parameter_count, shrink

from hpdsl.cost import bind, parameters
from hpdsl.errors import BuildError, UnknownNameError
from hpdsl.torch import build_model, collect_family_modules, explain_module, get_family_build_info, materialize
from hpdsl.torch.layers import CausalLM, Seq2SeqLM
from hpdsl.torch.modules import (
    Attention, ChunkedGatedDeltaNet, EagerGatedDeltaNet, GatedMLP, GroupedExperts, MLAttention, MoE,
)

EXAMPLES = sorted(examples_registry().models)
ROOT = Path(__file__).resolve().parents[2]


def _report(registry, model):
    return parameters(bind(model, registry.profile(model.profile)))


@pytest.mark.parametrize("name", EXAMPLES)
def test_meta_parameters_equal_the_estimator_at_reduced_depth(examples_registry, name: str) -> None:
    model = shrink(examples_registry.model(name))
    built = build_model(model, registry=examples_registry, include_mtp=True)
    assert all(p.is_meta for p in built.parameters())
    report = _report(examples_registry, model)
    assert parameter_count(built) == report.total
    assert parameter_count(built, mtp=True) == report.mtp


@pytest.mark.parametrize("name", EXAMPLES)
def test_meta_parameters_equal_the_estimator_at_full_size(examples_registry, name: str) -> None:
    model = examples_registry.model(name)
    built = build_model(name, registry=examples_registry)
    assert parameter_count(built) == _report(examples_registry, model).total


def test_small_specs_equal_the_estimator(small_registry) -> None:
    for model in small_registry.models.values():
        built = build_model(model, registry=small_registry, include_mtp=True)
        report = _report(small_registry, model)
        assert (parameter_count(built), parameter_count(built, mtp=True)) == (report.total, report.mtp)


def test_qwen3_next_layers_follow_the_stack(examples_registry) -> None:
    built = build_model(shrink(examples_registry.model("qwen3_next_80b_a3b")), registry=examples_registry)
    assert isinstance(built, CausalLM)
    mixers = [type(layer.mixer) for layer in built.layers]
    assert mixers == [ChunkedGatedDeltaNet] * 2 + [Attention] + [ChunkedGatedDeltaNet] * 2 + [Attention]
    ffn = built.layers[0].ffn
    assert isinstance(ffn, MoE) and isinstance(ffn.experts, GroupedExperts)
    assert ffn.shared_expert_gate is not None and len(ffn.shared_experts) == 1


def test_deepseek_v3_is_dense_then_moe_with_mla(examples_registry) -> None:
    built = build_model(shrink(examples_registry.model("deepseek_v3")), registry=examples_registry,
                        include_mtp=True)
    assert [type(layer.ffn) for layer in built.layers] == [GatedMLP, GatedMLP, MoE, MoE]
    assert all(type(layer.mixer) is MLAttention for layer in built.layers)
    assert built.mtp is not None and isinstance(built.mtp[0].layer.ffn, MoE)
    info = get_family_build_info(built.layers[0].mixer)  # built through the `mla` family
    assert info is not None and info.resolved.family.name == "mla"


def test_t5_is_an_encoder_decoder_with_cross_attention(examples_registry) -> None:
    built = build_model(shrink(examples_registry.model("t5_small")), registry=examples_registry)
    assert isinstance(built, Seq2SeqLM) and built.head is None  # tied embeddings
    assert built.decoder.layers[0].cross_attention is not None
    assert built.encoder.layers[0].cross_attention is None
    assert built.encoder.position_bias is not None and built.decoder.position_bias is not None


def test_selectors_reach_each_slot_role(small_registry) -> None:
    built = build_model("tiny_qwen3_next", registry=small_registry,
                        selectors={"linear_attention": {"backend": "eager"}, "attention": {"backend": "eager"}})
    assert type(built.layers[0].mixer) is EagerGatedDeltaNet
    assert built.layers[3].mixer.backend == "eager"
    with pytest.raises(BuildError, match=r"unknown slots \['atention'\]"):
        build_model("tiny_qwen3_next", registry=small_registry, selectors={"atention": {}})


def test_every_family_slot_carries_provenance_with_its_path(small_registry) -> None:
    built = build_model("tiny_qwen3_next", registry=small_registry)
    paths = {b.fqns[0]: b.info.resolved.family.name for b in collect_family_modules(built)}
    assert paths["layers.0.mixer"] == "gated_delta_net"
    assert paths["layers.3.mixer"] == "attention"
    assert paths["layers.0.ffn.experts"] == "grouped_experts"
    assert paths["layers.0.ffn.shared_experts.0"] == "mlp"
    info = get_family_build_info(built.layers[3].mixer)
    assert info is not None and info.resolved.arguments == {"layer_index": 3}


def test_a_family_override_and_a_missing_family(small_registry) -> None:
    with pytest.raises(BuildError, match=r"layers\.0\.ffn: the mlp slot is bound to family 'nope', which the registry does not hold"):
        build_model("tiny_dense", registry=small_registry, families={"mlp": "nope"})
    with pytest.raises(UnknownNameError, match="no model 'tiny'"):
        build_model("tiny", registry=small_registry)


def test_shapes_the_reference_layer_cannot_hold_are_refused(small_registry) -> None:
    dense = small_registry.model("tiny_dense")
    with pytest.raises(BuildError, match=r"states `mlp plain` \(2 matrices\), but its 'decoder' layers price ffMM 3"):
        build_model(attrs.evolve(dense, mlp="plain"), registry=small_registry)
    with pytest.raises(BuildError, match=r"'decoder' layers price 3 norms \(layer_norms 3\), but such a layer has 2"):
        build_model(attrs.evolve(dense, layer_norms=3), registry=small_registry)


def test_small_models_train_on_cpu(small_registry) -> None:
    torch.manual_seed(0)
    for name in ("tiny_qwen3_next", "tiny_deepseek_v3", "tiny_dense"):
        built = materialize(build_model(name, registry=small_registry), "cpu", seed=0)
        ids = torch.randint(0, 96, (2, 12))
        logits = built(ids)
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 96), ids[:, 1:].reshape(-1))
        loss.backward()
        assert torch.isfinite(loss)
        assert all(p.grad is not None for p in built.parameters() if p.requires_grad)


def test_t5_runs_forward(examples_registry) -> None:
    model = attrs.evolve(shrink(examples_registry.model("t5_small")), hidden=32, heads=2, head_dim=16,
                         kv_heads=2, vocab=64, ffn_width=64)
    built = materialize(build_model(model, registry=examples_registry), "cpu", seed=0)
    assert built(torch.randint(0, 64, (2, 7)), torch.randint(0, 64, (2, 5))).shape == (2, 5, 64)


def test_explain_names_family_variant_clause_mesh_and_sources(small_registry) -> None:
    built = build_model("tiny_qwen3_next", registry=small_registry)
    story = explain_module(built, "layers.3.mixer")
    assert story["family"] == "attention" and story["variant"] == "local" and story["clause"] == "default"
    assert story["mesh"] == {"tp": 1, "cp": 1, "ep": 1, "etp": 1, "pp": 1} and story["parallel_axis"] == "cp"
    family_line = next(i for i, line in enumerate((ROOT / "families" / "attention.hpf").read_text(
        encoding="utf-8").splitlines(), 1) if line.startswith("family attention"))
    assert story["declared_at"]["family"].endswith(f"families/attention.hpf:{family_line}:1")
    assert story["declared_at"]["selectors"]["backend"].startswith("<hpdsl>/families/attention.hpf:")
    inner = explain_module(built, "layers.3.mixer.q_proj")  # inside a family: its enclosing one
    assert inner["family_path"] == "layers.3.mixer" and inner["path"] == "layers.3.mixer.q_proj"
    outside = explain_module(built, "layers.0")
    assert outside["family"] is None and "layers.0.mixer" in outside["families_inside"]
    with pytest.raises(UnknownNameError, match="no module 'layers.99'"):
        explain_module(built, "layers.99")
