"""The families' `eager` terms are what the built reference modules dispatch, counted (docs/cost-model.md, "Eager execution").

A one-layer model of each configuration is built by hpdsl and run forward and backward
under hpdsl/torch/eager_count.py's TorchDispatchMode, at two sequence lengths: each block's
aten calls, and the elements its calls move per token (the difference of the two runs over
the difference of their tokens: what grows with the tokens, the weights' gradient sums
left out), equal what its slots' families declare (a MoE block's router, experts, shared
experts and gate together); the layer's total equals its column's (the slots and the
residual adds); the model-level columns (embedding; final norm, head, tied or not, and
loss) equal theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
import torch

from hpdsl.api import compile_sources
from hpdsl.bound.slots import layer_slots
from hpdsl.cost import bind
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.facts.eager import EagerWork, slot_eager
from hpdsl.cost.facts.params import pricing_bindings, pricing_families
from hpdsl.diagnostics import Source
from hpdsl.torch.eager_count import EagerCount
from hpdsl.torch.model import build_model

def _block(**fields: object) -> str:
    """Return a model block's text (`mla { }`, `moe { }`): its fields."""
    return "{\n" + "".join(f"    {name} {value}\n" for name, value in fields.items()) + "  }"


def _moe(experts: int, top_k: int, width: int, **more: object) -> str:
    """Return a `moe { }` block's text: routed experts, each token's top_k of them, each expert's width, the rest."""
    return _block(experts=experts, top_k=top_k, expert_width=width, **more)


BASE = {"hidden": 64, "heads": 4, "kv_heads": 2, "ffn_width": 96, "vocab": 128}
CONFIGS: dict[str, tuple[str, dict[str, object]]] = {
    "llama": ("llama2", {}),
    "mha_narrow_heads": ("llama2", {"hidden": 48, "heads": 6, "kv_heads": 6, "ffn_width": 80, "head_dim": 4}),
    "wide_heads": ("llama2", {"heads": 2, "kv_heads": 1, "head_dim": 48}),
    "layernorm_bias": ("llama2", {"norm": "layernorm", "norm_bias": "true"}),
    "layernorm": ("llama2", {"norm": "layernorm"}),
    "norm_offset": ("llama2", {"norm_offset": "true"}),
    "sandwich": ("gemma2", {}),
    "post_norm": ("olmo3", {}),
    "parallel": ("phi", {}),
    "parallel_two_norms": ("neox", {}),
    "no_rope": ("llama2", {"no_rope": "true"}),
    "partial_rotary": ("llama2", {"rotary_fraction": 0.25, "hidden": 96, "heads": 6, "kv_heads": 2, "head_dim": 16}),
    "qk_norm": ("llama2", {"qk_norm": "true"}),
    "qk_norm_full": ("llama2", {"qk_norm": "true", "qk_norm_full": "true", "heads": 2, "kv_heads": 1, "head_dim": 48}),
    "output_gate": ("llama2", {"output_gate": "true", "qk_norm": "true", "heads": 2, "kv_heads": 1, "head_dim": 48}),
    "biases": ("llama2", {"qkv_bias": "true", "o_bias": "true", "mlp_bias": "true"}),
    "gelu": ("llama2", {"activation": "gelu"}),
    "plain_gelu": ("gpt2", {"mlp": "plain", "activation": "gelu_tanh"}),
    "mixtral": ("mixtral", {"moe": _moe(4, 2, 32)}),
    "mixtral_wide": ("mixtral", {"hidden": 96, "heads": 6, "kv_heads": 3, "moe": _moe(8, 3, 48)}),
    "moe_top1": ("mixtral", {"moe": _moe(4, 1, 32)}),
    "qwen3_moe": ("qwen", {"qk_norm": "true", "head_dim": 32, "moe": _moe(8, 2, 16)}),
    "qwen2_moe": ("qwen", {"hidden": 128, "moe": _moe(8, 3, 32, shared_experts=1, shared_width=80,
                                                      shared_gate="true", norm_top_k="false")}),
    "olmoe": ("qwen", {"moe": _moe(8, 1, 16, norm_top_k="false")}),
    "two_shared": ("mixtral", {"moe": _moe(4, 2, 32, shared_experts=2, shared_width=48)}),
    "deepseek_v3_mla": ("deepseek", {"kv_heads": 4, "first_k_dense": 1, "rope_interleave": "true",
                                     "rope_type": '"yarn"', "rope_factor": 40.0, "rope_mscale": 1.0,
                                     "rope_original_positions": 4096,
                                     "mla": _block(q_lora_rank=32, kv_lora_rank=16, rope_dim=8, nope_dim=16,
                                                   v_head_dim=16)}),
    "mla_wide": ("deepseek", {"hidden": 80, "heads": 5, "kv_heads": 5, "first_k_dense": 1,
                              "mla": _block(q_lora_rank=24, kv_lora_rank=40, rope_dim=12, nope_dim=20,
                                            v_head_dim=12)}),
    "deepseek_v3_moe": ("deepseek", {"kv_heads": 4, "mla": _block(q_lora_rank=32, kv_lora_rank=16, rope_dim=8,
                                                                nope_dim=16, v_head_dim=16),
                                     "moe": _moe(32, 3, 32, shared_experts=1, shared_width=48, router_sigmoid="true",
                                                 router_correction="true", router_groups=8, router_group_top=3,
                                                 routed_scale=2.5)}),
    "sigmoid_router": ("mixtral", {"hidden": 96, "heads": 6, "kv_heads": 3,
                                   "moe": _moe(8, 1, 32, router_sigmoid="true", router_correction="true")}),
    "lfm2_conv": ("lfm2", {"stack": "[conv]", "ssm": "{ ssm_state 0  ssm_conv 5  ssm_expand 1 }"}),
    "lfm2_conv_bias": ("lfm2", {"hidden": 80, "heads": 5, "kv_heads": 5, "stack": "[conv]",
                                "ssm": "{ ssm_state 0  ssm_conv 3  ssm_expand 1  ssm_conv_bias }"}),
    "plain_relu_bias": ("gpt2", {"hidden": 48, "heads": 6, "kv_heads": 6, "ffn_width": 80, "mlp": "plain",
                                 "activation": "relu", "mlp_bias": "true"}),
}
"""Configurations (profile, settings): dims and the flags the families' terms read."""

SHORT, LONG = 8, 24


def _model(profile: str, settings: dict[str, object]) -> tuple[Any, Any]:
    body = "\n".join(f"  {name} {value}" for name, value in {**BASE, **settings, "layers": 1}.items())
    registry = compile_sources([Source("<test>", f"model probe : {profile} {{\n{body}\n}}\n")])
    return registry, registry.model("probe")


def _counted(run: Callable[[int], None], root: torch.nn.Module, tokens: int) -> EagerCount:
    run(tokens)  # the gradients exist from here on: a steady step
    with EagerCount(root) as count:
        run(tokens)
    return count


def _per_token(short: EagerCount, long: EagerCount, where: str) -> Fraction:
    return Fraction(long.moved[where] - short.moved[where], LONG - SHORT)


def _moved(work: EagerWork) -> Fraction:
    """Return a slot's elements per token on one rank without tp (and flash: no per-key term)."""
    return work.split + work.sequence + work.whole + work.logits


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_each_slot_dispatches_what_its_family_declares(name: str) -> None:
    registry, ir = _model(*CONFIGS[name])
    layer = build_model(ir, registry=registry, device="cpu", dtype=torch.float32).layers[0]
    x0 = torch.randn(1, LONG, ir.hidden, requires_grad=True)

    def run(tokens: int) -> None:
        x = x0[:, :tokens] * 1.0
        layer(x, positions=torch.arange(tokens)).backward(torch.ones(1, tokens, ir.hidden))

    short, long = _counted(run, layer, SHORT), _counted(run, layer, LONG)
    cost = bind(ir, registry.profile(ir.profile), families=registry.families)
    kind = next(iter(cost.distinct_kinds()))  # the one layer's kind (None: the profile's own slots)
    cfg = cost.kind_config(kind)
    families = pricing_families(cost)
    # A block's slots (a MoE's router, experts, shared experts and gate) together against the block's module.
    blocks: dict[str, EagerWork] = {}
    for slot in layer_slots(cfg, pricing_bindings(cost, kind)):
        work = slot_eager(slot, families)
        assert work is not None, f"{slot.path} declares no eager terms for {name}"
        block = slot.path.split(".")[0]
        blocks[block] = blocks.get(block, EagerWork()) + work
    # Another wiring feeds a block the residual stream itself (a post-norm, a parallel block), so the sum of its
    # input's gradients runs inside the block rather than in its norm: there only the layer's total is compared.
    for path in ("mixer", "ffn") if cfg.wiring in ("pre_norm", "sandwich") else ():
        work = blocks[path]
        assert (short.calls[path], _per_token(short, long, path)) == (work.calls, _moved(work)), path
    column = model_columns(cost).columns[0].eager
    assert column is not None
    # Outside every slot run the residual adds' forwards and this harness (positions, the input's slice and gradient).
    identity = torch.nn.Identity()

    def harness(tokens: int) -> None:
        torch.arange(tokens)
        (x0[:, :tokens] * 1.0).backward(torch.ones(1, tokens, ir.hidden))

    alone = (_counted(harness, identity, SHORT), _counted(harness, identity, LONG))
    calls = short.total_calls - alone[0].total_calls
    moved = _per_token(short, long, "") + sum(_per_token(short, long, p) for p in blocks) - _per_token(*alone, "")
    assert (calls, moved) == (column.calls, _moved(column))


@pytest.mark.parametrize(("profile", "settings"), [
    ("llama2", {}), ("gpt2", {"tie_embeddings": "true"}),
    ("gpt2", {"tie_embeddings": "true", "hidden": 96, "vocab": 200}),
    ("llama2", {"embed_scale": "true", "final_softcap": 30.0, "head_bias": "true", "hidden": 96, "vocab": 200}),
    ("gemma2", {"tie_embeddings": "true", "embed_scale": "true", "final_softcap": 30.0})])
def test_the_embedding_and_output_columns_dispatch_what_their_families_and_the_loss_declare(
        profile: str, settings: dict[str, object]) -> None:
    registry, ir = _model(profile, settings)
    model = build_model(ir, registry=registry, device="cpu", dtype=torch.float32)
    ids = {tokens: torch.randint(0, ir.vocab, (1, tokens)) for tokens in (SHORT, LONG)}

    def run(tokens: int) -> None:
        logits = model(ids[tokens])
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[tokens].flatten()).backward()

    short, long = _counted(run, model, SHORT), _counted(run, model, LONG)
    columns = {c.role: c.eager for c in model_columns(bind(ir, registry.profile(ir.profile),
                                                           families=registry.families)).columns}
    embedding, output = columns["embedding"], columns["output"]
    assert embedding is not None and output is not None
    # A tied head's table sums its two gradients in the lookup's backward: a call the output column prices.
    tied = int(bool(ir.tie_embeddings))
    assert (short.calls["embed"] - tied, _per_token(short, long, "embed")) == (embedding.calls, _moved(embedding))
    # The output column: the final norm, the head (tied: a linear outside every module), and what runs outside
    # every module (the loss, the positions).
    outside = ("norm", "head", "")
    assert sum(short.calls[w] for w in outside) + tied == output.calls
    assert sum(_per_token(short, long, w) for w in outside) == _moved(output)


@pytest.mark.parametrize(("profile", "settings"), [
    ("llama2", {"activation": "relu2"}), ("llama2", {"attention_sinks": "true"}), ("llama2", {"attn_softcap": 30.0}),
    ("llama2", {"glu_limit": 7.0, "glu_alpha": 1.702}), ("mixtral", {"glu_interleaved": "true", "moe": _moe(4, 2, 32)}),
    ("mixtral", {"moe": _moe(4, 2, 32, router_bias="true")}),
    # Llama 4's attention modifiers and Laguna's gate: not counted yet.
    ("llama2", {"qk_norm": "true", "qk_norm_unscaled": "true"}), ("llama2", {"rope_interleave": "true"}),
    ("llama2", {"softplus_gate": "true"}), ("llama2", {"no_rope": "true", "nope_temperature": 0.1}),
    ("llama2", {"attention_chunk": 16}),
    ("mixtral", {"moe": _moe(4, 2, 32, router_sigmoid="true", norm_top_k="false", router_scales_input="true")})])
def test_a_variant_the_counts_do_not_describe_leaves_its_column_to_the_op_vector(
        profile: str, settings: dict[str, object]) -> None:
    registry, ir = _model(profile, settings)
    cost = bind(ir, registry.profile(ir.profile), families=registry.families)
    assert model_columns(cost).columns[0].eager is None
