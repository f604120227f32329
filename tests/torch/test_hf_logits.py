"""The built model computes what transformers computes: one scaled published config per wiring kind.

Each case is a published config.json (tests/data/hf/, sources in tests/data/hf/SOURCES.md) at
small dims: transformers builds it with random weights (norms, biases and the router's score
correction moved off their initial values), hpdsl imports and builds it, and
hpdsl.torch.weights.load_hf_state_dict copies transformers' state dict in under the profile's
`weight` rules (no name map in this file). In float32 on the CPU both give the same logits to
1e-4. The cases cover every wiring a profile states today: sequential (pre-norm Llama, GPT-NeoX's
sequential residual), parallel (Phi; GPT-NeoX's two norms), norms after each sublayer (OLMo-3),
sandwich (Gemma-3), hybrid (LFM2's short convolutions beside attention; Qwen3.5's Gated DeltaNet,
its projections joined by `join` rules, dense and MoE; Nemotron 3's one-block Mamba-2, MoE, attention and
MLP layers, Super's MoE behind latent projections) and MoE routing (GLM-4.5-Air: sigmoid scores, score correction,
routed scale (GLM-4.5-Air); DeepSeek-V3.1: the same with MLA and group-limited top-k; gpt-oss: a biased router,
biased experts with a clamped, interleaved SwiGLU).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.errors import BuildError  # noqa: E402
from hpdsl.torch.weights import load_hf_state_dict  # noqa: E402
from tests.importers.hf_configs import published  # noqa: E402
from tests.torch.hf_pair import hf_pair, transformers_model  # noqa: E402

SEQ, VOCAB = 12, 101
SMALL = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": VOCAB, "max_position_embeddings": 64}
"""The dims every scaled config takes (its structure, flags and key names stay the published file's)."""
ROPE: dict[str, Any] = {}
"""The rotary keys stay the published file's: the built model turns by them (hpdsl/torch/modules/rope.py)."""
KINDS_ROPE: dict[str, Any] = {}
QWEN3_5 = {"num_hidden_layers": 4, "head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
           "linear_key_head_dim": 8, "linear_value_head_dim": 8,
           "rope_parameters": {**published("qwen3_5_9b")["text_config"]["rope_parameters"], "mrope_section": [1, 1, 0]}}
MOE = {"num_hidden_layers": 3, "first_k_dense_replace": 1, "n_routed_experts": 8, "num_experts_per_tok": 2,
       "moe_intermediate_size": 32, "n_shared_experts": 1}

GPT_OSS = {"head_dim": 16, "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": 5}

# (published file, the keys the scaled config changes, the wiring its layers are built with)
CASES: dict[str, tuple[str, dict[str, Any], set[str]]] = {
    "sequential_llama": ("llama_3_2_1b_instruct", {**ROPE}, {"pre_norm"}),
    "parallel_phi": ("phi_2", {}, {"parallel"}),  # 6 of 16 head dims rotary
    # Ministral 3's yarn with Llama 4's query scaling (llama_4_scaling_beta), its original context cut to 4
    # positions so that the 12 scaled positions reach past it.
    "query_scaled_ministral3": ("devstral_small_2_24b", {"head_dim": 16, "rope_parameters": {
        **published("devstral_small_2_24b")["text_config"]["rope_parameters"], "original_max_position_embeddings": 4}},
        {"pre_norm"}),
    # GPT-NeoX's fused query_key_value, a LayerNorm per block; use_parallel_residual false stacks the blocks.
    "parallel_two_norms_neox": ("gpt_neox_20b", {}, {"parallel_two_norms"}),
    "sequential_neox": ("gpt_neox_20b", {"use_parallel_residual": False}, {"pre_norm"}),
    "sublayer_post_norm_olmo3": ("olmo_3_1_32b_instruct",
                                 {**KINDS_ROPE, "num_hidden_layers": 4, "sliding_window": 64},
                                 {"sublayer_post_norm"}),
    "sandwich_gemma3": ("gemma_3_4b_it", {**KINDS_ROPE, "num_hidden_layers": 6, "head_dim": 16,
                                          "query_pre_attn_scalar": 24, "sliding_window": 5},
                        {"sandwich"}),
    # Gated DeltaNet beside gated attention (Qwen3.5's in_proj_qkv and in_proj_z joined into one projection),
    # partial rotary with M-RoPE's sections on a text sequence, QK-norm and (1 + w) norms.
    "hybrid_qwen3_5": ("qwen3_5_9b", {**QWEN3_5, "layer_types": ["linear_attention"] * 3 + ["full_attention"]},
                       {"pre_norm"}),
    # ... with Qwen3.5-MoE's experts (packed gate_up_proj) and its sigmoid-gated shared expert.
    "hybrid_moe_qwen3_5": ("qwen3_6_35b_a3b", {**QWEN3_5, "layer_types": ["linear_attention"] * 3 + ["full_attention"],
                                               "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                               "shared_expert_intermediate_size": 48,
                                               "rope_parameters": {**QWEN3_5["rope_parameters"], **{
                                                   k: v for k, v in published("qwen3_6_35b_a3b")["text_config"]
                                                   ["rope_parameters"].items() if k != "mrope_section"}}},
                           {"pre_norm"}),
    "hybrid_lfm2": ("lfm2_5_vl_1_6b", {**ROPE, "num_hidden_layers": 4, "block_ff_dim": 96},
                    {"pre_norm"}),
    # Sigmoid scores, e_score_correction_bias for the choice, norm_topk_prob; the file's routed_scaling_factor
    # is 1.0, so the scaled config sets 2.5 (GLM-4.7's) to exercise the scale.
    "moe_glm4_moe": ("glm_4_5_air", {**MOE, **ROPE, "head_dim": 16, "routed_scaling_factor": 2.5},
                     {"pre_norm"}),
    # Nemotron 3's one-block layers: Mamba-2 (96 wide beside hidden 64), MoE (relu² experts, sigmoid scores, score
    # correction, routed scale 2.5, one shared expert), attention and an MLP, by the pattern's characters.
    "hybrid_moe_nemotron_h": ("nemotron_3_nano_30b_a3b", {
        "hybrid_override_pattern": "MEM*E-", "head_dim": 16, "mamba_num_heads": 8, "mamba_head_dim": 12,
        "n_groups": 2, "ssm_state_size": 8, "chunk_size": 8, "n_routed_experts": 8, "num_experts_per_tok": 2,
        "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 48}, {"pre_norm"}),
    # Nemotron 3 Super's latent MoE: the router and the shared expert read the hidden vector, the routed experts
    # a 24-wide latent (fc1_latent_proj before them, fc2_latent_proj after); routed scale 5.0 and the MTP layer
    # (not built by transformers, ignored) as the file states them.
    "hybrid_latent_moe_nemotron_h": ("nemotron_3_super_120b_a12b_nvfp4", {
        "hybrid_override_pattern": "MEM*E-", "head_dim": 16, "mamba_num_heads": 8, "mamba_head_dim": 12,
        "n_groups": 2, "ssm_state_size": 8, "chunk_size": 8, "n_routed_experts": 8, "num_experts_per_tok": 2,
        "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 48, "moe_latent_size": 24},
        {"pre_norm"}),
    # MLA and DeepSeek-V3's group-limited top-k: 8 experts in 4 groups, each token's from its best 2.
    "moe_deepseek_v3": ("deepseek_v3_1", {**MOE, **ROPE, "num_key_value_heads": 4, "n_group": 4, "topk_group": 2,
                                          "q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
                                          "qk_nope_head_dim": 8, "v_head_dim": 16},
                        {"pre_norm"}),
    # gpt-oss: sliding and full layers by layer_types, sinks, q/k/v/o biases, YaRN, a biased router (softmax
    # over the top-k logits), biased experts packed gate and up column by column, their gate
    # gate·σ(1.702·gate)·(up + 1) clamped at swiglu_limit: the file's 7.0, and 0.05 so the clamp acts.
    "moe_gpt_oss": ("gpt_oss_120b", GPT_OSS, {"pre_norm"}),
    "moe_gpt_oss_clamped": ("gpt_oss_120b", {**GPT_OSS, "swiglu_limit": 0.05}, {"pre_norm"}),
}


def scaled(name: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Return a published (text) config at SMALL dims with `changes`, no token ids past the small vocabulary."""
    config = published(name)
    config = {**config.get("text_config", config), **SMALL, **changes}
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "rope_theta", "rope_local_base_freq"):
        config.pop(key, None)
    if "layer_types" in config:
        config["layer_types"] = config["layer_types"][: config["num_hidden_layers"]]
    return config


def _ids(seed: int = 1) -> Any:
    return torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(seed))


def _logits(model: Any, ids: Any, *, hf: bool = False) -> Any:
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits if hf else model(ids)


@pytest.mark.parametrize("case", list(CASES))
def test_logits_equal_transformers(case: str) -> None:
    name, changes, wirings = CASES[case]
    ours, theirs, _ = hf_pair(scaled(name, changes), jitter=0.1)
    assert {layer.wiring for layer in ours.layers} == wirings
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    torch.testing.assert_close(_logits(ours, _ids()), _logits(theirs, _ids(), hf=True), atol=1e-4, rtol=1e-4)


EPS_KEYS = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "norm_eps")
"""The config keys of the norms' epsilon (profiles/default.hpf and profiles/lfm2.hpf map them to norm_eps)."""


@pytest.mark.parametrize("case", list(CASES))
def test_every_built_norm_takes_the_published_epsilon(case: str) -> None:
    """The file's own epsilon (1e-5 or 1e-6; absent, its config class's), not hpdsl's default, is every built norm's."""
    ours, theirs, _ = hf_pair(scaled(*CASES[case][:2]))
    (eps,) = {value for key in EPS_KEYS if (value := getattr(theirs.config, key, None)) is not None}
    norms = {name: module.eps for name, module in ours.named_modules() if isinstance(getattr(module, "eps", None), float)}
    assert norms and norms == dict.fromkeys(norms, eps)


@pytest.mark.parametrize(("case", "key"), [("sequential_llama", "rms_norm_eps"), ("parallel_phi", "layer_norm_eps")])
def test_an_epsilon_far_from_the_default_still_gives_transformers_logits(case: str, key: str) -> None:
    """At eps 0.5 a norm built with any other epsilon moves the logits well past 1e-4 (fails with a fixed one)."""
    name, changes, _ = CASES[case]
    ours, theirs, _ = hf_pair(scaled(name, {**changes, key: 0.5}), jitter=0.1)
    torch.testing.assert_close(_logits(ours, _ids()), _logits(theirs, _ids(), hf=True), atol=1e-4, rtol=1e-4)


def test_the_hybrid_case_holds_both_mixers() -> None:
    ours, _, _ = hf_pair(scaled(*CASES["hybrid_lfm2"][:2]))
    assert [type(layer.mixer).__name__ for layer in ours.layers] == ["ShortConv", "ShortConv", "Attention", "ShortConv"]


@pytest.mark.parametrize("case", ["moe_glm4_moe", "moe_deepseek_v3", "hybrid_moe_nemotron_h"])
def test_softmax_routing_of_the_same_weights_gives_other_logits(case: str) -> None:
    """The routing is what the logits test checks: the same weights routed by a softmax top-k differ."""
    ours, theirs, _ = hf_pair(scaled(*CASES[case][:2]), jitter=0.1)
    expected = _logits(theirs, _ids(), hf=True)
    for layer in ours.layers:
        if hasattr(layer.ffn, "routing"):
            layer.ffn.routing = type(layer.ffn.routing)(layer.ffn.routing.top_k)
    assert not torch.allclose(_logits(ours, _ids()), expected, atol=1e-3)


def test_a_profile_without_a_models_names_reports_every_one() -> None:
    """Phi's weights under Llama's rules (the llama2 profile): each unmapped name is in one error."""
    ours, _, registry = hf_pair(scaled(*CASES["parallel_phi"][:2]))
    theirs = transformers_model(scaled(*CASES["parallel_phi"][:2]))
    with pytest.raises(BuildError) as raised:
        load_hf_state_dict(ours, theirs.state_dict(), registry.profile("llama2"), "llama", registry.profiles)
    message = str(raised.value)
    assert "'model.final_layernorm.weight' matches no weight rule of profile 'llama2'" in message
    assert "'model.layers.1.self_attn.dense.weight' maps to 'layers.1.mixer.dense.weight'" in message
    assert "the built model's 'norm.weight' gets no tensor" in message
    count = int(message.split(" ", 1)[0])
    assert count == message.count("\n  ") and count > 10  # one error, every problem a line of it


def _without(state: dict[str, Any], drop: str) -> dict[str, Any]:
    return {name: value for name, value in state.items() if drop not in name}


def test_a_join_missing_a_part_or_of_other_shapes_is_one_error_naming_them() -> None:
    """Qwen3.5's join rules: in_proj_z absent, or in_proj_b cut short, is a located problem, not a partial load."""
    ours, theirs, registry = hf_pair(scaled(*CASES["hybrid_qwen3_5"][:2]))
    profile, profiles = registry.profile("qwen3_5"), registry.profiles
    with pytest.raises(BuildError) as raised:
        load_hf_state_dict(ours, _without(theirs.state_dict(), "layers.0.linear_attn.in_proj_z."), profile,
                           "qwen3_5_text", profiles)
    message = str(raised.value)
    assert message.startswith("1 weight name problem")
    assert ("the built model's 'layers.0.mixer.in_proj_qkvz.weight' joins 2 tensors" in message
            and "holds no model.layers.{i}.linear_attn.in_proj_z. beside model.layers.0.linear_attn.in_proj_qkv.weight"
            in message), message
    state = dict(theirs.state_dict())
    state["model.layers.1.linear_attn.in_proj_b.weight"] = state["model.layers.1.linear_attn.in_proj_b.weight"][:1]
    with pytest.raises(BuildError, match=r"in_proj_b.weight, model.layers.1.linear_attn.in_proj_a.weight joined "
                                         r"have shape \(5, 64\), the built model's 'layers.1.mixer.in_proj_ba.weight' "
                                         r"\(8, 64\)"):
        load_hf_state_dict(ours, state, profile, "qwen3_5_text", profiles)


def test_qwen3_next_logits_equal_transformers() -> None:
    """Qwen3-Next fuses q, k, v, z (and b, a) key head by key head: its split rules regroup them (profiles/qwen3_5.hpf).

    No published Qwen3-Next config.json is in the search index (tests/data/hf/SOURCES.md): the config is
    Qwen3NextConfig's own at small dims (its layer pattern, experts and shared expert as the class builds them).
    """
    config = transformers.Qwen3NextConfig(
        hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
        num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48,
        vocab_size=VOCAB, max_position_embeddings=64,
        layer_types=["linear_attention"] * 3 + ["full_attention"]).to_dict()
    config = {key: value for key, value in config.items() if key not in ("pad_token_id", "bos_token_id", "eos_token_id")}
    ours, theirs, _ = hf_pair(config, jitter=0.1)
    torch.testing.assert_close(_logits(ours, _ids()), _logits(theirs, _ids(), hf=True), atol=1e-4, rtol=1e-4)
