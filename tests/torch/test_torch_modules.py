"""Reference modules: kernels agree with their definitions; shapes match Transformers' modules."""

from __future__ import annotations

import attrs
import pytest
import torch

from hpdsl.errors import BuildError
from hpdsl.torch import ModuleConfig
from hpdsl.torch.modules import (
    Attention, ChunkedGatedDeltaNet, EagerGatedDeltaNet, GroupedExperts, MLAttention, MoE, MXFP8GroupedExperts,
    RMSNorm,
)
from hpdsl.torch.modules.deltanet import (chunked_delta_rule, chunked_delta_rule_state, recurrent_delta_rule,
                                          recurrent_delta_rule_state)
from hpdsl.torch.modules.experts import mxfp8_round

GDN = ModuleConfig(hidden=64, key_heads=2, key_head_dim=16, value_heads=4,
                   value_head_dim=16, conv=4, attn_kind="linear")
ATTN = ModuleConfig(hidden=64, heads=4, head_dim=16, kv_heads=2, qk_norm=True, output_gate=True)


def _shapes(module: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(p.shape) for name, p in module.named_parameters()}


def test_chunked_delta_rule_equals_the_recurrence_with_gradients() -> None:
    torch.manual_seed(0)
    b, s, h, dk, dv = 2, 37, 3, 8, 6
    q, k = (torch.nn.functional.normalize(torch.randn(b, s, h, dk), dim=-1) for _ in range(2))
    v = torch.randn(b, s, h, dv)
    g = -torch.rand(b, s, h)
    beta = torch.rand(b, s, h)
    inputs = [t.clone().requires_grad_() for t in (q, k, v, g, beta)]
    reference = [t.clone().requires_grad_() for t in (q, k, v, g, beta)]
    chunked = chunked_delta_rule(*inputs, chunk=16)
    recurrent = recurrent_delta_rule(*reference)
    torch.testing.assert_close(chunked, recurrent, rtol=1e-4, atol=1e-5)
    weights = torch.randn_like(chunked)
    (chunked * weights).sum().backward()
    (recurrent * weights).sum().backward()
    for ours, theirs in zip(inputs, reference):
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("split", [1, 13, 16, 30])
def test_the_delta_rule_continues_from_a_handed_on_state(split: int) -> None:
    """What a cp rank computes from the previous rank's final state is the whole sequence's continuation."""
    torch.manual_seed(3)
    b, s, h, dk, dv = 2, 37, 3, 8, 6
    q, k = (torch.nn.functional.normalize(torch.randn(b, s, h, dk), dim=-1) for _ in range(2))
    v, g, beta = torch.randn(b, s, h, dv), -torch.rand(b, s, h), torch.rand(b, s, h)
    whole, final = chunked_delta_rule_state(q, k, v, g, beta, 16)
    first, state = chunked_delta_rule_state(*(t[:, :split] for t in (q, k, v, g, beta)), 16)
    second, again = chunked_delta_rule_state(*(t[:, split:] for t in (q, k, v, g, beta)), 16, state)
    torch.testing.assert_close(torch.cat([first, second], 1), whole, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(again, final, rtol=1e-4, atol=1e-5)
    _, eager = recurrent_delta_rule_state(q, k, v, g, beta)
    torch.testing.assert_close(eager, final, rtol=1e-4, atol=1e-5)


def test_the_convolution_continues_from_the_previous_inputs() -> None:
    torch.manual_seed(4)
    module = ChunkedGatedDeltaNet(GDN)
    qkv = torch.randn(2, 11, module.conv_dim)
    whole = module.short_convolution(qkv, module.conv1d.weight)
    tail = GDN.conv - 1
    later = module.continued_convolution(qkv[:, 6 - tail:6], qkv[:, 6:], module.conv1d.weight)
    torch.testing.assert_close(later, whole[:, 6:])


def test_the_two_gated_delta_net_variants_agree() -> None:
    torch.manual_seed(1)
    chunked = ChunkedGatedDeltaNet(GDN, chunk_size=8)
    eager = EagerGatedDeltaNet(GDN)
    eager.load_state_dict(chunked.state_dict())
    x = torch.randn(2, 19, 64)
    torch.testing.assert_close(chunked(x), eager(x), rtol=1e-4, atol=1e-5)


def test_gated_delta_net_is_causal() -> None:
    torch.manual_seed(2)
    module = ChunkedGatedDeltaNet(GDN, chunk_size=4)
    x = torch.randn(1, 10, 64)
    changed = x.clone()
    changed[:, 6:] = torch.randn(1, 4, 64)
    torch.testing.assert_close(module(x)[:, :6], module(changed)[:, :6])


def test_a_context_parallel_gated_delta_net_needs_the_mesh() -> None:
    with pytest.raises(BuildError, match=r"layers\.0\.mixer: a Gated DeltaNet passing its state over 2 ranks needs "
                       r"the job.s mesh with a .cp. axis"):
        ChunkedGatedDeltaNet(GDN, context={"cp_size": 2}, module_fqn="layers.0.mixer")


def test_attention_backends_agree_and_attention_is_causal() -> None:
    torch.manual_seed(3)
    sdpa = Attention(ATTN)
    eager = Attention(ATTN, backend="eager")
    eager.load_state_dict(sdpa.state_dict())
    x = torch.randn(2, 9, 64)
    torch.testing.assert_close(sdpa(x), eager(x), rtol=1e-4, atol=1e-5)
    changed = x.clone()
    changed[:, 5:] = 0
    torch.testing.assert_close(sdpa(x)[:, :5], sdpa(changed)[:, :5])
    with pytest.raises(ValueError, match="backend must be one of"):
        Attention(ATTN, backend="flash")
    with pytest.raises(ValueError, match="cannot be grouped"):
        Attention(ModuleConfig(hidden=64, heads=4, head_dim=16, kv_heads=3))


def test_grouped_experts_equal_a_per_token_loop() -> None:
    torch.manual_seed(4)
    cfg = ModuleConfig(hidden=16, ffn_width=8, experts=4, top_k=2, mlp_bias=True)
    experts = GroupedExperts(cfg)
    torch.nn.init.normal_(experts.up_bias)
    x = torch.randn(7, 16)
    indices = torch.randint(0, 4, (7, 2))
    weights = torch.rand(7, 2)
    expected = torch.stack([sum(weights[t, j] * experts.expert(int(indices[t, j]), x[t:t + 1])[0]
                                for j in range(2)) for t in range(7)])
    torch.testing.assert_close(experts(x, indices, weights), expected, rtol=1e-5, atol=1e-6)


GPT_OSS_UNIT = {"glu_alpha": 1.702, "glu_limit": 0.5}


def _gpt_oss_unit(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """GptOssExperts._apply_gate's arithmetic on a split gate and up (transformers' gpt_oss modeling)."""
    gate, up = gate.clamp(max=0.5), up.clamp(min=-0.5, max=0.5)
    return (up + 1) * (gate * torch.sigmoid(gate * 1.702))


def test_the_gated_unit_takes_glu_alpha_glu_limit_and_interleaving() -> None:
    """The dense gated MLP and the experts apply gpt-oss's clamped unit; interleaved experts read gate at ::2."""
    from hpdsl.torch.modules import GatedMLP
    torch.manual_seed(5)
    x = torch.randn(7, 16) * 4   # past the limit, so the clamp acts
    mlp = GatedMLP(ModuleConfig(hidden=16, ffn_width=8, **GPT_OSS_UNIT))
    expected = mlp.down_proj(_gpt_oss_unit(mlp.gate_proj(x), mlp.up_proj(x)))
    torch.testing.assert_close(mlp(x), expected)
    experts = GroupedExperts(ModuleConfig(hidden=16, ffn_width=8, experts=2, top_k=1, glu_interleaved=True,
                                          **GPT_OSS_UNIT))
    both = x @ experts.gate_up_proj[1]
    expected = _gpt_oss_unit(both[:, ::2], both[:, 1::2]) @ experts.down_proj[1]
    torch.testing.assert_close(experts.expert(1, x), expected)
    plain = GroupedExperts(ModuleConfig(hidden=16, ffn_width=8, experts=2, top_k=1))
    halves = (x @ plain.gate_up_proj[0]).chunk(2, dim=-1)
    torch.testing.assert_close(plain.expert(0, x), (torch.nn.functional.silu(halves[0]) * halves[1])
                               @ plain.down_proj[0])
    with pytest.raises(BuildError, match="glu_limit -1.0 would clamp the up to an empty range"):
        GatedMLP(ModuleConfig(hidden=16, ffn_width=8, glu_limit=-1.0))
    with pytest.raises(BuildError, match="no glu_alpha, glu_limit, glu_clamp or glu_interleaved"):
        MXFP8GroupedExperts(ModuleConfig(hidden=64, ffn_width=32, experts=2, top_k=1, glu_interleaved=True))


def test_the_gated_unit_takes_deepseek_v4_s_glu_clamp() -> None:
    """glu_clamp (DeepSeek-V4's swiglu_limit): gate ≤ c, up within ±c, then silu(gate)·up, no + 1 (dense and experts)."""
    from hpdsl.torch.modules import GatedMLP
    torch.manual_seed(5)
    x = torch.randn(7, 16) * 4   # past the clamp, so it acts
    mlp = GatedMLP(ModuleConfig(hidden=16, ffn_width=8, glu_clamp=0.5))
    gate, up = mlp.gate_proj(x).clamp(max=0.5), mlp.up_proj(x).clamp(min=-0.5, max=0.5)
    torch.testing.assert_close(mlp(x), mlp.down_proj(torch.nn.functional.silu(gate) * up))
    experts = GroupedExperts(ModuleConfig(hidden=16, ffn_width=8, experts=2, top_k=1, glu_clamp=0.5))
    gate, up = (x @ experts.gate_up_proj[1]).chunk(2, dim=-1)
    expected = (torch.nn.functional.silu(gate.clamp(max=0.5)) * up.clamp(min=-0.5, max=0.5)) @ experts.down_proj[1]
    torch.testing.assert_close(experts.expert(1, x), expected)


def test_moe_adds_gated_shared_experts() -> None:
    torch.manual_seed(5)
    cfg = ModuleConfig(hidden=16, ffn_width=8, experts=4, top_k=2, shared_experts=1, shared_width=8,
                       shared_gate=True)
    from hpdsl.torch.modules import GatedMLP, Router, SharedExpertGate

    moe = MoE(cfg, Router(cfg), GroupedExperts(cfg), [GatedMLP(cfg)], SharedExpertGate(cfg))
    x = torch.randn(2, 3, 16)
    assert moe(x).shape == x.shape
    assert moe.router.weight.shape == (4, 16) and moe.router.bias is None
    assert moe.shared_expert_gate is not None and moe.shared_expert_gate.weight.shape == (1, 16)
    ungated = MoE(cfg, Router(cfg), GroupedExperts(cfg), [GatedMLP(cfg)])
    ungated.load_state_dict(moe.state_dict(), strict=False)
    flat = x.reshape(-1, 16)
    shared = moe.shared_experts[0](flat)
    gate = torch.sigmoid(moe.shared_expert_gate(flat))
    with torch.no_grad():  # the gate scales the shared expert's output, nothing else
        torch.testing.assert_close(moe(x) - ungated(x), ((gate - 1) * shared).reshape(x.shape), rtol=1e-5, atol=1e-6)


def test_mxfp8_rounding_is_close_and_passes_gradients_straight_through() -> None:
    torch.manual_seed(6)
    x = torch.randn(4, 64, requires_grad=True)
    rounded = mxfp8_round(x, -1)
    assert (rounded - x).abs().max() < 0.07 * x.abs().max()
    rounded.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones_like(x))
    cfg = ModuleConfig(hidden=64, ffn_width=32, experts=2, top_k=1)
    exact, low = GroupedExperts(cfg), MXFP8GroupedExperts(cfg)
    low.load_state_dict(exact.state_dict())
    tokens, indices, weights = torch.randn(6, 64), torch.randint(0, 2, (6, 1)), torch.ones(6, 1)
    torch.testing.assert_close(low(tokens, indices, weights), exact(tokens, indices, weights),
                               rtol=0.1, atol=0.02)


def test_mxfp8_experts_refuse_other_parallel_axes() -> None:
    cfg = ModuleConfig(hidden=64, ffn_width=32, experts=4, top_k=1)
    with pytest.raises(BuildError, match=r"^m: MXFP8GroupedExperts requires TP=CP=PP=1; active tp, pp"):
        MXFP8GroupedExperts(cfg, context={"tp_size": 2, "pp_size": 2}, module_fqn="m")
    with pytest.raises(BuildError, match="supports only EP=1 or EP=2, found ep=4"):
        MXFP8GroupedExperts(cfg, context={"ep_size": 4})


def test_mla_is_causal_and_refuses_qk_norm() -> None:
    torch.manual_seed(7)
    cfg = ModuleConfig(hidden=64, heads=4, kv_heads=4, head_dim=16, attn_kind="mla", q_lora_rank=32,
                       kv_lora_rank=16, rope_dim=8, nope_dim=16)
    mla = MLAttention(cfg)
    x = torch.randn(2, 8, 64)
    changed = x.clone()
    changed[:, 4:] = 0
    torch.testing.assert_close(mla(x)[:, :4], mla(changed)[:, :4])
    without_q_latent = MLAttention(attrs.evolve(cfg, q_lora_rank=0))
    assert "q_proj.weight" in _shapes(without_q_latent)
    with pytest.raises(ValueError, match="no per-head QK norm"):
        MLAttention(attrs.evolve(cfg, qk_norm=True))


def test_rmsnorm_normalises_and_may_carry_a_bias() -> None:
    norm = RMSNorm(8, bias=True)
    out = norm(torch.full((2, 8), 3.0))
    torch.testing.assert_close(out, torch.ones(2, 8), rtol=1e-5, atol=1e-5)
    assert _shapes(norm) == {"weight": (8,), "bias": (8,)}


# --------------------------------------------------------------------------
# Parameter shapes as Transformers builds them
# --------------------------------------------------------------------------


def test_gated_delta_net_shapes_match_qwen3_next() -> None:
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    config = transformers.Qwen3NextConfig(hidden_size=64, linear_num_key_heads=2, linear_key_head_dim=16,
                                          linear_num_value_heads=4, linear_value_head_dim=16,
                                          linear_conv_kernel_dim=4)
    with torch.device("meta"):
        theirs, ours = Qwen3NextGatedDeltaNet(config, 0), ChunkedGatedDeltaNet(GDN)
    assert _shapes(ours) == _shapes(theirs)


def test_gated_attention_shapes_match_qwen3_next() -> None:
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextAttention

    config = transformers.Qwen3NextConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                          head_dim=16)
    with torch.device("meta"):
        theirs, ours = Qwen3NextAttention(config, 3), Attention(ATTN)
    assert _shapes(ours) == _shapes(theirs)


def test_mla_shapes_match_deepseek_v3() -> None:
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention

    config = transformers.DeepseekV3Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
                                           q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8,
                                           qk_nope_head_dim=16, v_head_dim=16)
    cfg = ModuleConfig(hidden=64, heads=4, kv_heads=4, head_dim=16, attn_kind="mla", q_lora_rank=32,
                       kv_lora_rank=16, rope_dim=8, nope_dim=16)
    with torch.device("meta"):
        theirs, ours = DeepseekV3Attention(config, 0), MLAttention(cfg)
    assert _shapes(ours) == _shapes(theirs)


def test_a_latent_projection_module_without_its_two_projections_is_refused() -> None:
    """The latent_proj slot's module must hold fc1_latent_proj and fc2_latent_proj (families/router.hpf's params)."""
    from hpdsl.torch.modules import MoELatentProjection, Router
    cfg = ModuleConfig(hidden=16, ffn_width=8, experts=4, top_k=2, latent_width=8)
    router, experts = Router(cfg), GroupedExperts(attrs.evolve(cfg, hidden=8))
    with pytest.raises(BuildError, match="latent_proj slot's Linear holds no fc1_latent_proj and fc2_latent_proj"):
        MoE(cfg, router, experts, latent=torch.nn.Linear(16, 8))
    moe = MoE(cfg, router, experts, latent=MoELatentProjection(cfg))
    assert moe(torch.randn(2, 3, 16)).shape == (2, 3, 16)
