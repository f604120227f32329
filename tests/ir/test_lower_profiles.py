"""The lowered standard profiles equal docs/reference.md#profile-op-vectors and
docs/reference.md#profile-defaults exactly."""

from __future__ import annotations

from functools import cache

import pytest

from hpdsl.check import check_files
from hpdsl.ir.lower_profiles import lower_profile, lower_profiles, lower_vocabulary
from hpdsl.ir.nodes import FactsIR, OpInfo, ProfileIR, RunFacts
from hpdsl.model.slots import SLOTS
from hpdsl.resources import data_dir
from hpdsl.model.fields import RUN_FACTS
from hpdsl.scope import Scope

DEFAULT_RUN = {name: fact.default for name, fact in RUN_FACTS.items()}
from hpdsl.syntax import parse_text

OPS = ("attMM", "attBMM", "ffMM", "softmax", "dropout", "normOp", "gather", "headCast", "ffAct",
       "linrec")
DECODER = (4, 2, 3, 1, 0, 2, 4, 1, 1, 0)
PLAIN = (4, 2, 2, 1, 0, 2, 4, 1, 1, 0)
SANDWICH = (4, 2, 3, 1, 0, 4, 4, 1, 1, 0)
PARALLEL = (4, 2, 2, 1, 0, 1, 4, 1, 1, 0)  # one norm for the attention and feed-forward side by side (Phi)
MAMBA = (4, 0, 3, 0, 0, 2, 4, 0, 1, 0)  # a state-space mixer: no score matmul, softmax or score cast
WINDOWED: dict[str, tuple[tuple[int, ...], str, str | None]] = {
    "full_attention": (DECODER, "full", None), "sliding_attention": (DECODER, "sliding", None)}

# docs/reference.md#profile-op-vectors: profile -> kind -> (counts in OpCounts order, attention, ffn)
TABLE: dict[str, dict[str, tuple[tuple[int, ...], str, str | None]]] = {
    "default": {"decoder": (DECODER, "full", None)},
    "llama2": {"decoder": (DECODER, "full", None), **WINDOWED},
    "qwen": {"decoder": (DECODER, "full", None), **WINDOWED},
    "mixtral": {"decoder": (DECODER, "full", None)},
    "pangualpha": {"decoder": ((4, 1, 2, 2, 5, 4, 4, 1, 1, 0), "full", None)},
    # hpdsl counts t5's score work per attention (profiles/t5.hpf, docs/validation.md), not upstream's
    "t5": {"encoder": ((4, 2, 2, 1, 5, 2, 4, 1, 1, 0), "full", None),
           "decoder": ((8, 4, 2, 2, 7, 3, 6, 2, 1, 0), "full", None)},
    # GLM-5.2's layers by indexer_types: their own DSA indexer, or the previous one's selection (no indexer).
    "deepseek": {"dense": (DECODER, "full", "dense"), "moe": (DECODER, "full", "moe"),
                 "indexed_dense": (DECODER, "full", "dense"), "indexed_moe": (DECODER, "full", "moe"),
                 "shared_index_dense": (DECODER, "full", "dense"), "shared_index_moe": (DECODER, "full", "moe")},
    "cm": {"dense": (DECODER, "full", "dense"), "moe": (DECODER, "full", "moe")},
    "qwen3_5": {"full_attention": (DECODER, "full", None),
                "linear_attention": ((4, 0, 3, 0, 0, 2, 4, 0, 1, 1), "linear", None)},
    "vision": {"encoder": ((4, 2, 2, 1, 0, 2, 4, 1, 1, 0), "full", None)},
    # Not upstream: the profiles of issue 9's architectures (HF layer_types kind names).
    "starcoder2": {"decoder": (PLAIN, "full", None), "full_attention": (PLAIN, "full", None),
                   "sliding_attention": (PLAIN, "sliding", None)},
    "gpt2": {"decoder": (PLAIN, "full", None)},
    "olmoe": {"decoder": (DECODER, "full", None)},
    "gemma3": {"full_attention": (SANDWICH, "full", None), "sliding_attention": (SANDWICH, "sliding", None)},
    "gpt_oss": {"full_attention": (DECODER, "full", None), "sliding_attention": (DECODER, "sliding", None)},
    "jamba": {"attention_dense": (DECODER, "full", "dense"), "attention_moe": (DECODER, "full", "moe"),
              "mamba_dense": (MAMBA, "ssm", "dense"), "mamba_moe": (MAMBA, "ssm", "moe")},
    "bamba": {"full_attention": (DECODER, "full", None), "linear_attention": (MAMBA, "ssm", None)},
    # Issue 21's wirings: Phi's parallel block, OLMo-3's and EXAONE-4's norms after each sublayer.
    "phi": {"decoder": (PARALLEL, "full", None)},
    "olmo3": WINDOWED, "exaone4": WINDOWED,
    # LFM2: attention layers and gated short-convolution layers (a layout-priced ssm slot).
    "lfm2": {"full_attention": (DECODER, "full", None), "conv": (MAMBA, "ssm", None)},
    # One block per layer: a mixer or a feed-forward, one norm and two collectives each; Nemotron 3's
    # MoE layers (pattern E) are the MLP layers' op vector with routed experts.
    "nemotron_h": {"full_attention": ((4, 2, 0, 1, 0, 1, 2, 1, 0, 0), "full", "dense"),
                   "linear_attention": ((4, 0, 0, 0, 0, 1, 2, 0, 0, 0), "ssm", "dense"),
                   "mlp": ((0, 0, 2, 0, 0, 1, 2, 0, 1, 0), "full", "dense"),
                   "moe": ((0, 0, 2, 0, 0, 1, 2, 0, 1, 0), "full", "moe")},
    # Gemma 2 (issue 21's attention modifiers): Gemma 3's sandwich layers without the QK-norm.
    "gemma2": {"full_attention": (SANDWICH, "full", None), "sliding_attention": (SANDWICH, "sliding", None)},
    # GLM-4.5/4.7 and GLM-4.7-Flash: dense layers first, then MoE layers, as DeepSeek's.
    "glm4_moe": {"dense": (DECODER, "full", "dense"), "moe": (DECODER, "full", "moe")},
    # Mllama: Llama layers, and cross-attention layers at the config's cross_attention_layers.
    "mllama": {"full_attention": (DECODER, "full", None), "cross_attention": (DECODER, "cross", None)},
    # Issue 21: MiniMax-M2 (one MoE kind) and MiMo-V2-Flash (full/sliding x dense/MoE, the sliding kinds' dims).
    "minimax_m2": {"decoder": (DECODER, "full", None)},
    "mimo_v2": {"full_attention_dense": (DECODER, "full", "dense"), "full_attention_moe": (DECODER, "full", "moe"),
                "sliding_attention_dense": (DECODER, "sliding", "dense"),
                "sliding_attention_moe": (DECODER, "sliding", "moe")},
    # Issue 21: Gemma 4, Gemma 3's sandwich layers; the full kind's own head shapes, the sliding kind's own values.
    "gemma4": {"full_attention": (SANDWICH, "full", None), "sliding_attention": (SANDWICH, "sliding", None),
               "full_attention_kv_shared": (SANDWICH, "full", None),
               "sliding_attention_kv_shared": (SANDWICH, "sliding", None)},
    # Issue 21 (outer wiring): BLOOM's pre-norm layers with a plain feed-forward, as GPT-2's.
    "bloom": {"decoder": (PLAIN, "full", None)},
    # GPT-NeoX: a plain feed-forward beside the attention, a LayerNorm each (parallel_two_norms).
    "neox": {"decoder": (PLAIN, "full", None)},
    # DeepSeek-V4: MIXER_FFN kinds, every layer MoE (sliding, CSA, HCA × learnt or hash-routed).
    "deepseek_v4": {f"{mixer}_{ffn}": (DECODER, "sliding", "moe")
                    for ffn in ("moe", "hash_moe")
                    for mixer in ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")},
    # Llama 4: rotary and no-position layers, × dense and MoE where the config interleaves them.
    "llama4": {"rope_attention": (DECODER, "full", None), "nope_attention": (DECODER, "full", None),
               **{f"{mixer}_{ffn}": (DECODER, "full", ffn) for mixer in ("rope_attention", "nope_attention")
                  for ffn in ("dense", "moe")}},
    # Laguna: full and sliding layers, × dense and MoE (the sliding ones with their own query heads).
    "laguna": {f"{mixer}_{ffn}": (DECODER, attention, ffn) for mixer, attention in
               (("full_attention", "full"), ("sliding_attention", "sliding")) for ffn in ("dense", "moe")},
}

# docs/reference.md#profile-defaults: profile -> (default, run overrides, v_head_dim); llama2 and
# mixtral leave upstream's grad_bytes 2 to the strategy's precision
DEFAULTS: dict[str, tuple[str, dict[str, int | bool], int | None]] = {
    "default": ("decoder", {}, None),
    "llama2": ("decoder", {"grad_accumulation": True}, None),
    "mixtral": ("decoder", {}, None),
    "pangualpha": ("decoder", {"dropout_bytes": 1}, None),
    "t5": ("encoder", {"dropout_bytes": 1, "norm_keeps_input": True, "loss_upcast": False}, None),
    "deepseek": ("moe", {}, 128),
    "cm": ("moe", {}, 128),
    "qwen": ("decoder", {"shard_activations": True}, None),
    "qwen3_5": ("full_attention", {"shard_activations": True}, None),
    "vision": ("encoder", {}, None),
    "starcoder2": ("decoder", {}, None), "gpt2": ("decoder", {}, None), "olmoe": ("decoder", {}, None),
    "gemma3": ("full_attention", {}, None), "gpt_oss": ("full_attention", {}, None),
    "jamba": ("attention_dense", {}, None), "bamba": ("full_attention", {}, None),
    "nemotron_h": ("full_attention", {}, None),
    "phi": ("decoder", {}, None), "olmo3": ("full_attention", {}, None), "exaone4": ("full_attention", {}, None),
    "lfm2": ("full_attention", {}, None),
    "gemma2": ("full_attention", {}, None),
    "glm4_moe": ("moe", {}, None),
    "mllama": ("full_attention", {}, None),
    "minimax_m2": ("decoder", {}, None), "mimo_v2": ("full_attention_moe", {}, None),
    "gemma4": ("full_attention", {}, None),
    "bloom": ("decoder", {}, None),
    "neox": ("decoder", {}, None),
    "deepseek_v4": ("sliding_attention_moe", {}, None),
}

MODEL_TYPES = {
    # A composite (vision-language) wrapper is listed by the profile that prices its text model.
    "llama2": ("llama", "mistral", "phi3", "ministral3", "mistral3", "voxtral"), "mixtral": ("mixtral",),
    "qwen": ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_vl", "qwen3_vl_text", "qwen2_vl", "qwen2_5_vl",
             "qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text"),
    "qwen3_5": ("qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"),
    "deepseek": ("deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25", "deepseek_v32", "glm_moe_dsa"), "t5": ("t5",),
    "starcoder2": ("starcoder2",),
    "gpt2": ("gpt2",), "olmoe": ("olmoe",), "gemma3": ("gemma3_text", "gemma3"), "gpt_oss": ("gpt_oss",),
    "jamba": ("jamba",), "bamba": ("bamba",), "nemotron_h": ("nemotron_h",),
    "phi": ("phi",), "olmo3": ("olmo3",), "exaone4": ("exaone4", "exaone4_5", "exaone4_5_text"), "lfm2": ("lfm2", "lfm2_vl"),
    "gemma2": ("gemma2",),
    "glm4_moe": ("glm4_moe", "glm4_moe_lite"),
    "mllama": ("mllama_text_model", "mllama"),
    "minimax_m2": ("minimax_m2",), "mimo_v2": ("mimo_v2_flash",),
    "gemma4": ("gemma4_text", "gemma4"),
    "bloom": ("bloom",),
    "neox": ("gpt_neox",),
    "deepseek_v4": ("deepseek_v4",),
}


@cache
def _scope() -> Scope:
    # The families too: the standard slot bindings (profiles/slots.hpf) name them.
    files = [parse_text(path.read_text(), path.name) for folder in ("profiles", "families")
             for path in sorted(data_dir(folder).glob("*.hpf"))]
    scope, diagnostics = check_files(files)
    assert diagnostics == ()
    return scope


@cache
def _profiles() -> dict[str, ProfileIR]:
    return lower_profiles(_scope())


def test_the_known_profiles_are_exactly_the_table() -> None:
    assert set(_profiles()) == set(TABLE)


def test_the_vocabulary_lowers_in_order() -> None:
    ops = lower_vocabulary(_scope())
    assert tuple(op.name for op in ops) == OPS
    assert all(isinstance(op, OpInfo) and op.meaning for op in ops)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_kinds_counts_and_flavours(name: str) -> None:
    profile = _profiles()[name]
    assert list(profile.kinds) == list(TABLE[name])  # declaration order
    for kind_name, (counts, attention, ffn) in TABLE[name].items():
        kind = profile.kinds[kind_name]
        assert tuple(kind.ops) == OPS  # vocabulary order
        assert tuple(kind.ops.values()) == counts
        assert (kind.name, kind.attention, kind.ffn) == (kind_name, attention, ffn)
        assert kind.source is not None and kind.source.file == f"{name}.hpf"


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_default_run_and_model(name: str) -> None:
    default, overrides, v_head_dim = DEFAULTS[name]
    profile = _profiles()[name]
    assert profile.default == default
    assert profile.run == RunFacts(**{**DEFAULT_RUN, **overrides})
    assert profile.v_head_dim == v_head_dim
    assert profile.model_types == MODEL_TYPES.get(name, ())
    assert profile.source is not None and profile.source.line >= 1


def test_run_defaults_match_the_spec_table() -> None:
    assert RunFacts() == RunFacts(**DEFAULT_RUN)


def test_inheritance_is_recorded_and_applied() -> None:
    profiles = _profiles()
    assert profiles["deepseek"].kinds["moe"].base == "dense"
    assert profiles["cm"].kinds["moe"].base == "dense"
    assert profiles["qwen3_5"].kinds["linear_attention"].base == "full_attention"
    assert profiles["t5"].kinds["decoder"].base is None


def test_facts_keep_source_order_and_merge_per_model_type() -> None:
    qwen = _profiles()["qwen"]
    assert [block.model_types for block in qwen.facts] == [("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl",
                                                            "qwen2_vl_text", "qwen2_5_vl_text"),
                                                           ("qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text")]
    assert qwen.facts_for("qwen2")["qkv_bias"] is True
    assert qwen.facts_for("qwen3_moe")["qk_norm"] is True
    assert "qk_norm" not in qwen.facts_for("qwen2")
    assert _profiles()["t5"].facts_for("t5")["norm_bias"] is False
    assert _profiles()["qwen3_5"].facts_for("qwen3_next")["qk_norm"] is True


def test_lower_profile_of_a_small_spec() -> None:
    text = ('vocabulary { mm "matmuls"  act "activations" }\n'
            'profile p { model_types "x" run { grad_bytes = 2 } model { v_head_dim = 64 }\n'
            'facts "x" { qk_norm = true } kind b { ops { act 1 mm 2 } } kind a from b { ffn moe } }')
    scope, diagnostics = check_files([parse_text(text, "p.hpf")])
    assert diagnostics == ()
    profile = lower_profile(scope.profiles["p"], scope)
    assert list(profile.kinds) == ["b", "a"]
    assert profile.kinds["b"].ops == {"mm": 2, "act": 1}
    assert list(profile.kinds["b"].ops) == ["mm", "act"]
    assert (profile.kinds["a"].ffn, profile.kinds["a"].base) == ("moe", "b")
    assert profile.default is None
    assert profile.run == RunFacts(grad_bytes=2)
    assert profile.v_head_dim == 64
    assert profile.facts == (FactsIR(("x",), {"qk_norm": True}),)


# --------------------------------------------------------------------------
# Slot bindings
# --------------------------------------------------------------------------

STANDARD_SLOTS = {"attention": "attention", "linear_attention": "gated_delta_net", "ssm": "mamba", "mla": "mla",
                  "mlp": "mlp", "experts": "grouped_experts", "shared_experts": "mlp",
                  "router": "router", "shared_gate": "shared_gate", "latent_proj": "moe_latent_projection",
                  "per_layer_input": "per_layer_input", "hyper_connection": "hyper_connection", "norm": "norm", "embedding": "embedding", "head": "output_head",
                  "cross_attention": "cross_attention", "gate": "tanh_gate",
                  "position_bias": "relative_position_bias",
                  "project_in": "input_projection", "project_out": "output_projection",
                  "per_layer_proj": "output_projection", "hyper_head": "hyper_head", "mtp_proj": "mtp_projection"}


KIND_SLOTS = {("bamba", "linear_attention"): {"ssm": "mamba2"},
              ("nemotron_h", "linear_attention"): {"ssm": "mamba2"},
              ("lfm2", "conv"): {"ssm": "short_conv"},
              **{("deepseek_v4", f"{mixer}_hash_moe"): {"router": "hash_router"}
                 for mixer in ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")}}
"""The standard kinds that bind a slot of their own: Bamba's and Nemotron-H's Mamba-2 layers, LFM2's short convolution,
DeepSeek-V4's hash-routed layers."""

PROFILE_SLOTS = {"gemma4": {"router": "scaled_router"}, "deepseek_v4": {"attention": "compressed_attention"}}
"""The standard profiles that bind a slot of their own: Gemma 4's router (Gemma4TextRouter's scales), DeepSeek-V4's
attention."""


def test_every_standard_profile_and_kind_binds_every_slot_to_the_standard_family() -> None:
    assert list(STANDARD_SLOTS) == list(SLOTS)
    for profile in _profiles().values():
        own = {**STANDARD_SLOTS, **PROFILE_SLOTS.get(profile.name, {})}
        assert profile.slots == own, profile.name
        for kind in profile.kinds.values():
            assert kind.slots == {**own, **KIND_SLOTS.get((profile.name, kind.name), {})}, kind.name


SLOTTED = """
vocabulary { mm "matmuls" }
family f { factory "pkg.mod:F"  variant local "pkg.mod:F" default }
family g { factory "pkg.mod:G"  variant local "pkg.mod:G" default }
family h { factory "pkg.mod:H"  variant local "pkg.mod:H" default }
slots { head f  norm f  embedding f  attention f  linear_attention f  ssm f }
slots { mla f  mlp f  experts f  shared_experts f  router f  shared_gate f  latent_proj f  per_layer_input f }
slots { cross_attention f  gate f  position_bias f }
slots { project_in f  project_out f  per_layer_proj f  mtp_proj f  hyper_connection f  hyper_head f }
profile p {
  slots { mlp g  head g }
  kind base { slots { experts h  norm g }  ops { mm 1 } }
  kind child from base { slots { norm h  attention g } }
  kind grandchild from child { }
  kind plain { ops { mm 2 } }
}
profile q { kind only { ops { mm 1 } } }
"""


def _slotted() -> dict[str, ProfileIR]:
    scope, diagnostics = check_files([parse_text(SLOTTED, "s.hpf")])
    assert diagnostics == ()
    return lower_profiles(scope)


def test_top_level_bindings_are_every_profiles_defaults_and_a_profile_overrides_them() -> None:
    defaults = dict.fromkeys(SLOTS, "f")
    profiles = _slotted()
    assert profiles["q"].slots == defaults
    assert profiles["q"].kinds["only"].slots == defaults
    assert profiles["p"].slots == {**defaults, "mlp": "g", "head": "g"}
    # SLOTS order, whatever order the blocks bound them in
    assert list(profiles["p"].slots) == list(SLOTS)


def test_a_kind_overrides_its_profile_and_inherits_through_from() -> None:
    profile = _slotted()["p"]
    own = {**dict.fromkeys(SLOTS, "f"), "mlp": "g", "head": "g"}
    assert profile.kinds["plain"].slots == own
    assert profile.kinds["base"].slots == {**own, "experts": "h", "norm": "g"}
    # the child's own bindings win over its base's; the rest are inherited
    assert profile.kinds["child"].slots == {**own, "experts": "h", "norm": "h", "attention": "g"}
    assert profile.kinds["grandchild"].slots == profile.kinds["child"].slots
    assert all(list(kind.slots) == list(SLOTS) for kind in profile.kinds.values())


def test_a_profile_no_model_uses_lowers_the_slots_it_binds() -> None:
    text = ('vocabulary { mm "matmuls" }\nfamily f { factory "pkg.mod:F"  variant v "pkg.mod:F" default }\n'
            'profile p { slots { mlp f } kind k { slots { norm f }  ops { mm 1 } } }')
    scope, diagnostics = check_files([parse_text(text, "p.hpf")])
    assert diagnostics == ()
    profile = lower_profile(scope.profiles["p"], scope)
    assert profile.slots == {"mlp": "f"}
    assert profile.kinds["k"].slots == {"mlp": "f", "norm": "f"}


def test_each_kind_lowers_its_wiring_inherited_through_from() -> None:
    wirings = {(p, k): kind.wiring for p, profile in _profiles().items() for k, kind in profile.kinds.items()
               if kind.wiring is not None}
    assert wirings == {("phi", "decoder"): "parallel",
                       ("olmo3", "full_attention"): "sublayer_post_norm",
                       ("olmo3", "sliding_attention"): "sublayer_post_norm",
                       ("exaone4", "full_attention"): "sublayer_post_norm",
                       ("exaone4", "sliding_attention"): "sublayer_post_norm",
                       ("gemma3", "full_attention"): "sandwich", ("gemma3", "sliding_attention"): "sandwich",
                       ("gemma2", "full_attention"): "sandwich", ("gemma2", "sliding_attention"): "sandwich",
                       ("mllama", "cross_attention"): "gated",
                       ("gemma4", "full_attention"): "sandwich", ("gemma4", "sliding_attention"): "sandwich",
                       ("gemma4", "full_attention_kv_shared"): "sandwich",
                       ("gemma4", "sliding_attention_kv_shared"): "sandwich",
                       ("neox", "decoder"): "parallel_two_norms"}


E2B_SHARED = {"kv_shared": "1", "ffn_width": "(1 + double_wide_mlp) * ffn_width"}
"""Gemma 4's key/value-sharing kinds: no keys or values of their own, double-wide MLPs with double_wide_mlp."""


def test_each_kind_lowers_its_dims_inherited_through_from() -> None:
    """MiMo-V2-Flash's sliding kinds: twice the kv heads and sinks, the MoE one through `from`."""
    dims = {(p, k): {name: dim.text for name, dim in kind.dims.items()}
            for p, profile in _profiles().items() for k, kind in profile.kinds.items() if kind.dims}
    sliding = {"kv_heads": "2 * kv_heads", "attention_sinks": "1"}
    CSA = {"compress_ratio": "csa_ratio", "compress_indexed": "1"}  # noqa: N806 (DeepSeek-V4's CSA layers)
    assert dims == {("mimo_v2", "sliding_attention_dense"): sliding, ("mimo_v2", "sliding_attention_moe"): sliding,
                    ("gemma4", "full_attention"): {"head_dim": "global_head_dim", "kv_heads": "global_kv_heads"},
                    ("gemma4", "sliding_attention"): {"k_eq_v": "0"},
                    ("gemma4", "full_attention_kv_shared"): {"head_dim": "global_head_dim", "kv_heads": "global_kv_heads",
                                                             **E2B_SHARED},
                    ("gemma4", "sliding_attention_kv_shared"): {"k_eq_v": "0", **E2B_SHARED},
                    ("deepseek", "shared_index_dense"): {"index_n_heads": "0"},
                    ("deepseek", "shared_index_moe"): {"index_n_heads": "0"},
                    **{("deepseek_v4", f"compressed_sparse_attention_{ffn}"): CSA for ffn in ("moe", "hash_moe")},
                    **{("deepseek_v4", f"heavily_compressed_attention_{ffn}"): {"compress_ratio": "hca_ratio"}
                       for ffn in ("moe", "hash_moe")},
                    **{("llama4", f"nope_attention{ffn}"): {"no_rope": "1", "qk_norm": "0"}
                       for ffn in ("", "_dense", "_moe")},
                    **{("laguna", f"sliding_attention_{ffn}"): {"heads": "sliding_heads"} for ffn in ("dense", "moe")}}


def test_a_kinds_own_dims_override_its_bases() -> None:
    text = ('vocabulary { mm "matmuls" }\nprofile p { kind a { ops { mm 1 }  dims { heads = 2 * heads  qk_norm = 1 } }\n'
            '  kind b from a { dims { heads = heads + 4 } } }')
    scope, diagnostics = check_files([parse_text(text, "p.hpf")])
    assert diagnostics == ()
    kinds = lower_profile(scope.profiles["p"], scope).kinds
    assert {n: d.text for n, d in kinds["b"].dims.items()} == {"heads": "heads + 4", "qk_norm": "1"}
