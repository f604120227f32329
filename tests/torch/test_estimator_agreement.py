"""The built model agrees with the estimator: parameters, forward FLOPs, bytes saved for backward.

Every example is built at small dimensions (bench/agreement.py's small_model),
run forward once on CPU tensors in float32, and measured (FlopCounterMode, saved
tensor hooks); docs/validation.md is the table these rows make.
"""

from __future__ import annotations

import pytest
import torch
from agreement import Agreement, small_model, validation_suite
from torch_support import examples_registry, parameter_count

from hpdsl.cost import bind, parameters
from hpdsl.cost.estimate import estimate
from hpdsl.cost.formulas.flops import forward_flops_by_term
from hpdsl.model.strategy import Strategy
from hpdsl.torch import build_model
from hpdsl.torch.modules.fused import fused, rotate

EXAMPLES = sorted(examples_registry().models)
SHIPPED_T5 = "t5_small"
PER_ATTENTION_T5 = "t5_small (per-attention counts, eager)"
BATCH, SEQ = 2, 128


@pytest.fixture(scope="module")
def rows(examples_registry) -> tuple[Agreement, ...]:
    return validation_suite(examples_registry, batch=BATCH, seq_len=SEQ)


def _of(rows: tuple[Agreement, ...], model: str, quantity: str) -> list[Agreement]:
    found = [r for r in rows if r.model == model and r.quantity == quantity]
    assert found, f"no {quantity} rows for {model}"
    return found


@pytest.mark.parametrize("name", EXAMPLES)
def test_small_models_have_the_estimators_parameters(examples_registry, name: str) -> None:
    model = small_model(examples_registry.model(name))
    built = build_model(model, registry=examples_registry)
    assert parameter_count(built) == parameters(bind(model, examples_registry.profile(model.profile))).total


@pytest.mark.parametrize("name", [*EXAMPLES, PER_ATTENTION_T5])
def test_forward_flops_agree_within_two_percent(rows, name: str) -> None:
    for row in _of(rows, name, "forward FLOPs"):
        assert abs(row.relative) <= 0.02, row


@pytest.mark.parametrize("name", [*(n for n in EXAMPLES if n != SHIPPED_T5), PER_ATTENTION_T5])
def test_saved_bytes_agree_within_ten_percent(rows, name: str) -> None:
    for row in _of(rows, name, "saved bytes"):
        assert abs(row.relative) <= 0.10, row


def test_every_kind_of_layer_is_measured(rows) -> None:
    parts = {(r.model, r.part.split(" ")[0]) for r in rows if r.quantity == "saved bytes"}
    assert {("llama3_8b", "layer"), ("mixtral_8x7b", "layer"), ("deepseek_v3", "dense"),
            ("deepseek_v3", "moe"), ("qwen3_next_80b_a3b", "linear_attention"),
            ("qwen3_next_80b_a3b", "full_attention"), (PER_ATTENTION_T5, "encoder"),
            (PER_ATTENTION_T5, "decoder")} <= parts
    notes = {(r.model, r.part.split(" ")[0]): r.note for r in rows if r.quantity == "saved bytes"}
    assert notes["llama3_8b", "layer"] == "flash" and notes["deepseek_v3", "moe"] == "math"  # MLA: d_v ≠ d_qk


def test_the_shipped_t5_profile_counts_every_score_matmul(rows) -> None:
    """t5's attBMM is 2 per attention (QKᵀ and A·V): the matmul FLOPs are exact, encoder and decoder."""
    flops = {r.part.split(" ")[0]: r for r in _of(rows, SHIPPED_T5, "forward FLOPs")}
    assert flops["encoder"].measured == flops["encoder"].estimated
    assert flops["decoder"].measured == flops["decoder"].estimated


def test_the_term_breakdown_adds_up_to_the_estimate(examples_registry) -> None:
    model = small_model(examples_registry.model("qwen3_next_80b_a3b"))
    cost = bind(model, examples_registry.profile(model.profile))
    terms = forward_flops_by_term(cost, batch=BATCH, seq_len=SEQ)
    per_layer = {kind: sum(t.values()) for kind, t in terms.items()}
    body = sum(per_layer[kind] for kind in cost.layer_kinds())
    # The breakdown counts the whole score square, as the estimate executes it without flash.
    forward = estimate(cost, Strategy(micro_batch=BATCH, global_batch=BATCH, seq_len=SEQ,
                                      flash_attention=False)).flops.forward
    assert body + per_layer["output"] == pytest.approx(forward, rel=1e-12)


def test_fused_saves_only_its_inputs_and_gives_the_same_gradients() -> None:
    torch.manual_seed(0)
    x, weight = torch.randn(4, 8, requires_grad=True), torch.randn(8, requires_grad=True)

    def swish_scale(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(a) * torch.sigmoid(a) * w

    saved: list[int] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.untyped_storage().data_ptr()) or t,
                                                  lambda t: t):
        out = fused(swish_scale, x, weight)
    assert set(saved) == {x.untyped_storage().data_ptr(), weight.untyped_storage().data_ptr()}
    grads = torch.autograd.grad(out.square().sum(), (x, weight))
    expected = torch.autograd.grad(swish_scale(x, weight).square().sum(), (x, weight))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("scale", [1.0, 1.3])
def test_rotation_backward_is_the_inverse_rotation(scale: float) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3, 8, requires_grad=True)
    positions = torch.arange(5)
    grad = torch.randn(2, 5, 3, 8)
    inverse = 1.0 / (10000.0 ** (torch.arange(0, 8, 2, dtype=torch.float32) / 8))
    (got,) = torch.autograd.grad(rotate(x, positions, inverse, scale), x, grad)
    # Through plain autograd: the rotation written out (the Jacobian-vector product of the definition),
    # cos and sin scaled as YaRN's attention factor scales them.
    (want,) = torch.autograd.functional.vjp(lambda t: _rotation(t, positions, inverse, scale), x, grad)[1:]
    torch.testing.assert_close(got, want)


def _rotation(x: torch.Tensor, positions: torch.Tensor, inverse: torch.Tensor, scale: float) -> torch.Tensor:
    angles = positions.to(torch.float32)[:, None] * inverse[None, :]
    cos = scale * torch.cat([angles.cos(), angles.cos()], -1)[None, :, None, :]
    sin = scale * torch.cat([angles.sin(), angles.sin()], -1)[None, :, None, :]
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin
