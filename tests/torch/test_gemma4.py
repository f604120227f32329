"""Gemma 4's attention (profiles/gemma4.hpf) built by hpdsl and held to transformers' Gemma4TextModel.

The full-attention layers have their own head shapes (global_head_dim, num_global_key_value_heads:
the kind's dims) and, with attention_k_eq_v, take their values from the key projection (no v_proj);
every layer RMS-normalises its values without a scale and scales its scores by 1 (q/k-normed).
A small config from transformers' own Gemma4TextConfig is imported with hpdsl's importer and built
by hpdsl.torch.build_model: the build has the estimate's count, which is transformers' count on the
meta device; loaded with transformers' random weights it gives transformers' logits to 1e-4 (float32,
CPU). Both layer types there use the default rotary at one base over their whole head (Gemma 4's
published full layers turn a quarter of the head at another base, "proportional": hpdsl rotates one
base over rotary_fraction of every layer, so the logits test states the one rotary both build).

Gemma-4-E2B's constructs are held the same way on a small config of its form: per-layer inputs
(hidden_size_per_layer_input: the model's per-layer table, projection and norm, each layer's gate,
projection and norm after its feed-forward), the last num_kv_shared_layers layers reusing the keys
and values of the last earlier layer of their type (no k/v projections), and their double-wide MLPs.
And Gemma-4-26B-A4B's (enable_moe_block): routed experts beside every layer's MLP, the router reading
the residual stream (families/scaled_router.hpf), each branch with its own norms, the two summed.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.api import compile_paths, compile_sources  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.ir.overrides import apply_sets  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.init import shard_init  # noqa: E402
from hpdsl.torch.model import materialize  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ROPE = {"rope_type": "default", "rope_theta": 10000.0}
NAMES = [(r"embed\.", "model.embed_tokens."), (r"layers\.(\d+)\.mixer_norm\.", r"model.layers.\1.input_layernorm."),
         (r"layers\.(\d+)\.mixer_post_norm\.", r"model.layers.\1.post_attention_layernorm."),
         (r"layers\.(\d+)\.mixer\.", r"model.layers.\1.self_attn."),
         (r"layers\.(\d+)\.ffn_norm\.", r"model.layers.\1.pre_feedforward_layernorm."),
         (r"layers\.(\d+)\.ffn_post_norm\.", r"model.layers.\1.post_feedforward_layernorm."),
         (r"layers\.(\d+)\.ffn\.mlp\.", r"model.layers.\1.mlp."),
         (r"layers\.(\d+)\.ffn\.mlp_post_norm\.", r"model.layers.\1.post_feedforward_layernorm_1."),
         (r"layers\.(\d+)\.ffn\.moe_norm\.", r"model.layers.\1.pre_feedforward_layernorm_2."),
         (r"layers\.(\d+)\.ffn\.moe_post_norm\.", r"model.layers.\1.post_feedforward_layernorm_2."),
         (r"layers\.(\d+)\.ffn\.router\.weight", r"model.layers.\1.router.proj.weight"),
         (r"layers\.(\d+)\.ffn\.(router|experts)\.", r"model.layers.\1.\2."),
         (r"layers\.(\d+)\.ffn\.", r"model.layers.\1.mlp."), (r"norm\.", "model.norm."), (r"head\.", "lm_head."),
         (r"per_layer_embed\.", "model.embed_tokens_per_layer."), (r"per_layer_proj\.", "model.per_layer_model_projection."),
         (r"per_layer_norm\.", "model.per_layer_projection_norm."),
         (r"layers\.(\d+)\.per_layer_input\.", r"model.layers.\1."),
         (r"layers\.(\d+)\.per_layer_post_norm\.", r"model.layers.\1.post_per_layer_input_norm.")]
"""hpdsl's parameter names (slot paths) → transformers' Gemma 4 names (the routed experts' matrices transposed)."""


@pytest.fixture(scope="module")
def stdlib() -> Registry:
    return compile_paths([ROOT / "profiles", ROOT / "families"])


def _gemma4(**changes: Any) -> dict[str, Any]:
    """Return a small Gemma 4: two sliding layers then a full one, heads 16 wide, full heads 32 wide."""
    values = {"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "global_head_dim": 32, "num_global_key_value_heads": 1, "attention_k_eq_v": True,
              "vocab_size": 101, "max_position_embeddings": 64, "num_hidden_layers": 3, "sliding_window": 64,
              "hidden_size_per_layer_input": 0, "final_logit_softcapping": 30.0,
              "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
              "rope_parameters": {"full_attention": ROPE, "sliding_attention": ROPE}, **changes}
    config = transformers.Gemma4TextConfig(**values).to_dict()
    # In the published files' form (tests/data/hf/gemma_4_31b_it.json): transformers 5.24 writes the full
    # layers' head shapes as a per_layer_config table, the published configs as these two keys.
    del config["per_layer_config"]
    return {**config, "global_head_dim": values["global_head_dim"],
            "num_global_key_value_heads": values["num_global_key_value_heads"]}


def _built(config: dict[str, Any], stdlib: Registry) -> tuple[Any, Registry]:
    imported = import_hf_config(config, profiles=stdlib.profiles, name="small")
    registry = compile_sources([Source("small.hpf", imported.text)])
    return build_model(registry.models["small"], registry=registry, device="meta"), registry


def _hf(config: dict[str, Any]) -> Any:
    hf_config = transformers.AutoConfig.for_model(**config)
    hf_config._attn_implementation = "eager"
    return transformers.AutoModelForCausalLM.from_config(hf_config)


E2B = {"attention_k_eq_v": False, "num_global_key_value_heads": None, "num_hidden_layers": 6,
       "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
       "hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 103, "num_kv_shared_layers": 3,
       "use_double_wide_mlp": True}
"""Gemma-4-E2B's form, small: per-layer inputs 8 wide from a 103-row table, the last three layers (sliding,
sliding, full) reusing layer 1's and layer 2's keys and values, their MLPs twice as wide."""


MOE = {"enable_moe_block": True, "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 24}
"""Gemma-4-26B-A4B's form, small: 8 routed experts 24 wide (2 per token) beside every layer's 96-wide MLP."""


# Without k_eq_v, as Gemma-4-E2B publishes it: num_global_key_value_heads null, the full layers keep
# num_key_value_heads (the import rules' derive).
@pytest.mark.parametrize("changes", [{}, {"attention_k_eq_v": False, "num_global_key_value_heads": None}, E2B,
                                     {**E2B, "use_double_wide_mlp": False}, MOE],
                         ids=["k_eq_v", "own_v_proj", "e2b", "e2b_narrow_mlp", "moe_beside_mlp"])
def test_the_build_has_the_estimates_count_which_is_transformers(changes: dict[str, Any], stdlib: Registry) -> None:
    values = _gemma4(**changes)
    model, registry = _built(values, stdlib)
    small = registry.models["small"]
    cost = bind(small, registry.profiles[small.profile], families=registry.families)
    with torch.device("meta"):
        theirs = sum(p.numel() for p in _hf(values).parameters())
    assert sum(p.numel() for p in model.parameters()) == parameters(cost).total == theirs


def test_a_full_layer_takes_its_values_from_the_key_projection(stdlib: Registry) -> None:
    model, _ = _built(_gemma4(), stdlib)
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters() if ".mixer." in name}
    assert shapes["layers.0.mixer.v_proj.weight"] == (32, 64)  # two kv heads of 16
    assert shapes["layers.2.mixer.k_proj.weight"] == (32, 64)  # one global kv head of 32
    assert shapes["layers.2.mixer.q_proj.weight"] == (128, 64)  # four heads of 32
    assert "layers.2.mixer.v_proj.weight" not in shapes


def _hf_name(name: str) -> str:
    for pattern, replacement in NAMES:
        if re.match(pattern, name):
            return re.sub(pattern, replacement, name, count=1)
    raise AssertionError(f"no transformers name for {name}")


def test_the_kv_sharing_layers_have_no_keys_or_values_and_twice_the_mlp(stdlib: Registry) -> None:
    model, _ = _built(_gemma4(**E2B), stdlib)
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    assert "layers.2.mixer.k_proj.weight" in shapes and "layers.5.mixer.k_proj.weight" not in shapes
    assert not any(name.startswith(("layers.3.mixer.k", "layers.3.mixer.v")) for name in shapes)
    assert shapes["layers.2.ffn.up_proj.weight"] == (96, 64) and shapes["layers.3.ffn.up_proj.weight"] == (192, 64)
    assert shapes["per_layer_embed.weight"] == (103, 6 * 8) and shapes["per_layer_proj.weight"] == (6 * 8, 64)
    assert shapes["layers.0.per_layer_input.per_layer_input_gate.weight"] == (8, 64)
    assert [m.mixer.kv_source[0].layer_index for m in model.layers[3:]] == [1, 1, 2]


def test_the_moe_layers_hold_the_experts_beside_the_mlp(stdlib: Registry) -> None:
    model, _ = _built(_gemma4(**MOE), stdlib)
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters() if name.startswith("layers.0.")}
    assert shapes["layers.0.ffn.mlp.up_proj.weight"] == (96, 64)
    assert shapes["layers.0.ffn.experts.gate_up_proj"] == (8, 64, 2 * 24)
    assert shapes["layers.0.ffn.router.weight"] == (8, 64) and shapes["layers.0.ffn.router.per_expert_scale"] == (8,)
    assert {"layers.0.ffn.mlp_post_norm.weight", "layers.0.ffn.moe_norm.weight", "layers.0.ffn.moe_post_norm.weight",
            "layers.0.ffn.router.scale", "layers.0.ffn_norm.weight", "layers.0.ffn_post_norm.weight"} <= set(shapes)


def _theirs(state: dict[str, Any], name: str) -> Any:
    """Return transformers' tensor for hpdsl's parameter `name`, in hpdsl's layout (the experts' transposed)."""
    tensor = state[_hf_name(name)]
    return tensor.transpose(-1, -2) if ".experts." in name else tensor


@pytest.mark.parametrize("changes", [{}, E2B, MOE], ids=["31b_form", "e2b_form", "moe_form"])
def test_gemma4_gives_transformers_logits(changes: dict[str, Any], stdlib: Registry) -> None:
    config = _gemma4(**changes)
    model, _ = _built(config, stdlib)
    ours = materialize(model, "cpu", seed=0).eval()
    torch.manual_seed(0)
    theirs = _hf(config).float().eval()
    state = theirs.state_dict()
    with torch.no_grad():
        for name, parameter in ours.named_parameters():
            parameter.copy_(_theirs(state, name) + 0.1 * torch.randn_like(parameter))  # norms not all ones
            _theirs(state, name).copy_(parameter)
    theirs.load_state_dict(state)
    ids = torch.randint(0, 101, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(input_ids=ids).logits, atol=1e-4, rtol=1e-4)


DEEPSEEK_SMALL = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 4, "vocab": 128, "ffn_width": 96,
                  "first_k_dense": 1, "experts": 4, "top_k": 2, "expert_width": 32, "q_lora_rank": 32,
                  "kv_lora_rank": 16, "rope_dim": 8, "nope_dim": 16, "v_head_dim": 16, "router_groups": 1,
                  "router_group_top": 1, "mtp": 0}
"""examples/deepseek_v3.hpf scaled down: its router keeps the score-correction buffer."""


def test_a_meta_build_is_drawn_whole_on_one_process_and_per_unit(stdlib: Registry) -> None:
    # A meta build allocates with to_empty: whatever a linear's weight and bias do not cover is unset until
    # drawn. Both ways hpdsl draws a meta model (materialize, and hpdsl train's per-unit shard_init) set
    # Gemma 4's router scales to ones and DeepSeek's score correction to zeros (reset_state), where they
    # were once left as memory held (a NaN loss under tp with sequence parallelism).
    gemma, _ = _built(_gemma4(**MOE), stdlib)
    deepseek_ir = apply_sets(compile_paths([ROOT / "examples" / "deepseek_v3.hpf"]).models["deepseek_v3"],
                             DEEPSEEK_SMALL)
    for draw in ("materialize", "shard_init"):
        for model in (gemma, build_model(deepseek_ir, registry=stdlib, device="meta")):
            model = copy.deepcopy(model)  # each draw starts from the unallocated build
            if draw == "materialize":
                materialize(model, seed=0)
            else:
                shard_init(model, torch.device("cpu"), 0, {})(model)
            for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
                assert torch.isfinite(tensor).all(), (draw, name)
                if name.endswith(("router.scale", "router.per_expert_scale")):
                    assert torch.equal(tensor, torch.ones_like(tensor)), (draw, name)
                if name.endswith("e_score_correction_bias"):
                    assert torch.equal(tensor, torch.zeros_like(tensor)), (draw, name)
            assert any(n.endswith("per_expert_scale") or n.endswith("e_score_correction_bias")
                       for n, _ in [*model.named_parameters(), *model.named_buffers()])
