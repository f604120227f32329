"""Lowering checked models into ModelIR: stated fields, blocks, groups, sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpdsl.check import check_files
from hpdsl.diagnostics import Source
from hpdsl.ir.lower_models import lower_model, lower_models
from hpdsl.ir.nodes import LayerGroup, ModelIR, block_stated
from hpdsl.model.fields import block_fields
from hpdsl.resources import stdlib_files
from hpdsl.scope import Scope
from hpdsl.syntax import parse_source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
L, F = "linear_attention", "full_attention"


def _scope(text: str, name: str = "case.hpf") -> Scope:
    sources = [Source(name, text)] + [Source(n, p.read_text()) for n, p in stdlib_files()]
    scope, diagnostics = check_files([parse_source(source) for source in sources])
    assert not any(d.is_error for d in diagnostics), diagnostics
    return scope


def _lower(text: str) -> ModelIR:
    scope = _scope(text)
    (model,) = [m for m in scope.models.values() if m.name.span.file == "case.hpf"]
    return lower_model(model, scope)


def _example(name: str) -> ModelIR:
    path = EXAMPLES / f"{name}.hpf"
    scope = _scope(path.read_text(), f"examples/{path.name}")
    return lower_model(scope.models[name], scope)


def g(kind: str, count: int, mtp: bool = False) -> LayerGroup:
    return LayerGroup(kind, count, mtp)


@pytest.mark.parametrize(("name", "profile", "groups"), [
    ("llama2_7b", "llama2", (g("decoder", 32),)),
    ("llama3_8b", "llama2", (g("decoder", 32),)),
    ("mixtral_8x7b", "mixtral", (g("decoder", 32),)),
    ("qwen3_30b_a3b", "qwen", (g("decoder", 48),)),
    ("deepseek_v3", "deepseek", (g("dense", 3), g("moe", 58), g("moe", 1, mtp=True))),
    ("qwen3_next_80b_a3b", "qwen3_5", (g(L, 3), g(F, 1)) * 12 + (g(F, 1, mtp=True),)),
    ("t5_small", "t5", (g("encoder", 6), g("decoder", 6))),
])
def test_examples_lower_to_their_groups(name: str, profile: str,
                                        groups: tuple[LayerGroup, ...]) -> None:
    model = _example(name)
    assert (model.name, model.profile, model.groups) == (name, profile, groups)
    assert sum(group.count for group in model.groups if not group.mtp) == model.layers
    assert sum(group.count for group in model.groups if group.mtp) == model.mtp


def test_deepseek_v3_fields_and_blocks() -> None:
    model = _example("deepseek_v3")
    assert (model.hidden, model.layers, model.heads, model.kv_heads, model.vocab) == (
        7168, 61, 128, 128, 129280)
    assert (model.ffn_width, model.first_k_dense, model.mtp) == (18432, 3, 1)
    assert _block(model, "mla") == dict(kv_lora_rank=512, rope_dim=64, nope_dim=128, v_head_dim=128,
                                        q_lora_rank=1536, index_n_heads=0, index_head_dim=None, index_topk=None)
    assert _block(model, "moe") == dict(experts=256, top_k=8, expert_width=2048, shared_experts=1,
                                        shared_width=None, shared_gate=False, router_bias=False, mlp_beside=None,
                                        latent_width=None,
                                        router_sigmoid=True, router_correction=True, router_groups=8,
                                        router_group_top=4, norm_top_k=None, routed_scale=2.5, expert_bias=None,
                                        router_sqrtsoftplus=None, router_scales_input=None,
                                        router_correction_counted=None)
    assert not block_stated(model, "linear") and model.head_dim is None
    assert not model.stack_stated and model.layer_types is None
    assert (model.source.file, model.source.line) == ("examples/deepseek_v3.hpf", 7)


def test_qwen3_next_fields_and_blocks() -> None:
    model = _example("qwen3_next_80b_a3b")
    assert model.stack_stated
    assert (model.qk_norm, model.output_gate, model.tie_embeddings) == (True, True, False)
    assert (model.norm, model.mlp, model.activation) == ("rmsnorm", "gated", "silu")
    assert _block(model, "linear") == dict(key_heads=16, key_head_dim=128, value_heads=32,
                                           value_head_dim=128, conv=4)
    assert block_stated(model, "moe") and model.shared_gate is True
    assert (model.shared_experts, model.shared_width) == (1, 512)


def test_t5_small_counts_both_towers() -> None:
    model = _example("t5_small")
    assert (model.layers, model.head_dim, model.position_buckets) == (12, 64, 32)
    assert (model.mlp, model.activation, model.tie_embeddings) == ("plain", "relu", True)


def test_unstated_fields_stay_none_and_mtp_is_zero() -> None:
    model = _lower("model m { hidden 64  layers 2  heads 4  vocab 100  ffn_width 128 }")
    assert model.profile == "default" and model.groups == (g("decoder", 2),)
    assert model.mtp == 0
    unstated = ("kv_heads", "head_dim", "max_positions", "first_k_dense",
                "layer_norms", "tie_embeddings", "qk_norm", "output_gate", "qkv_bias", "o_bias",
                "mlp_bias", "norm_bias", "norm", "mlp", "activation")
    assert {name: getattr(model, name) for name in unstated} == dict.fromkeys(unstated)
    assert not any(block_stated(model, block) for block in ("moe", "linear", "mla"))


def test_flags_are_true_and_the_first_statement_wins_in_blocks() -> None:
    model = _lower("model m : qwen { hidden 64  layers 2  heads 4  vocab 100  ffn_width 128  qk_norm  o_bias false\n"
                   "  moe { experts 4  top_k 1  expert_width 32  shared_experts 1  shared_gate } }")
    assert (model.qk_norm, model.o_bias) == (True, False)
    assert _block(model, "moe") == dict(experts=4, top_k=1, expert_width=32, shared_experts=1,
                                        shared_width=None, shared_gate=True, router_bias=None, mlp_beside=None,
                                        latent_width=None,
                                        router_sigmoid=None, router_correction=None, router_groups=1, router_group_top=1,
                                        norm_top_k=None, routed_scale=None, expert_bias=None, router_sqrtsoftplus=None,
                                        router_scales_input=None, router_correction_counted=None)


def test_layer_types_lower_to_names_and_groups() -> None:
    text = (f"model m : qwen3_5 {{ hidden 64  layers 5  heads 4  vocab 100  ffn_width 128  mtp 1\n"
            "  linear { key_heads 2  key_head_dim 8  value_heads 4  value_head_dim 8  conv 4 }\n"
            f"  layer_types [{L}, {L}, {F}, {L}, {F}, {L}] }}")
    model = _lower(text)
    assert model.layer_types == (L, L, F, L, F, L)
    assert model.groups == (g(L, 2), g(F, 1), g(L, 1), g(F, 1), g(F, 1, mtp=True))
    assert not model.stack_stated


def test_unknown_layer_types_lower_to_the_default_kind() -> None:
    model = _lower("model m : qwen { hidden 64  layers 2  heads 4  vocab 100  ffn_width 128\n"
                   "  layer_types [chunked_attention, global_attention] }")
    assert model.groups == (g("decoder", 2),)


def test_lower_models_keeps_declaration_order() -> None:
    scope = _scope("model b { hidden 64  layers 1  heads 4  vocab 100  ffn_width 128 }\n"
                   "model a { hidden 64  layers 1  heads 4  vocab 100  ffn_width 128 }")
    assert list(lower_models(scope)) == ["b", "a"]


def _block(model: ModelIR, block: str) -> dict[str, object]:
    return {name: getattr(model, name) for name in block_fields(block)}
