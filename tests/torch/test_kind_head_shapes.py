"""Per-kind head shapes (a kind's `dims { }`) and narrower value heads, built and held to transformers.

MiMo-V2-Flash's sliding layers have twice the kv heads of its full ones and a sink logit per
query head, and every layer's values are v_head_dim wide beside head_dim queries and keys
(profiles/mimo_v2.hpf); MiniMax-M2's QK-norm spans the whole q and k projections
(profiles/minimax_m2.hpf). A small config of each, from transformers' own config class (no
published file is in the search index: tests/data/hf/SOURCES.md), is imported with hpdsl's
importer and built by hpdsl.torch.build_model: the build has the estimate's count, which is
transformers' count on the meta device. A dense MiMo-V2-Flash (every layer's feed-forward an
MLP) loaded with transformers' random weights gives transformers' logits to 1e-4 (float32, CPU).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.api import compile_paths, compile_sources  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.model import materialize  # noqa: E402
from hpdsl.torch.weights import load_hf_state_dict  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 1,
         "vocab_size": 101, "max_position_embeddings": 64}
"""The dims every small config takes."""

@pytest.fixture(scope="module")
def stdlib() -> Registry:
    return compile_paths([ROOT / "profiles", ROOT / "families"])


def _mimo(**changes: Any) -> dict[str, Any]:
    """Return a small MiMo-V2-Flash: a full then two sliding layers, head_dim 24, values 16, rotary base 10000."""
    rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.334}
    values = {**SMALL, "num_hidden_layers": 3, "head_dim": 24, "v_head_dim": 16, "n_routed_experts": 4,
              "num_experts_per_tok": 2, "moe_intermediate_size": 32, "sliding_window": 64,
              "rope_parameters": {"full_attention": rope, "sliding_attention": rope}, **changes}
    return transformers.MiMoV2FlashConfig(**values).to_dict()


def _minimax() -> dict[str, Any]:
    config = transformers.MiniMaxM2Config(**SMALL, num_hidden_layers=2, head_dim=16, num_local_experts=4,
                                          num_experts_per_tok=2).to_dict()
    return {**config, "rotary_dim": 8, "qk_norm_type": "per_layer", "use_qk_norm": True}


def _built(config: dict[str, Any], stdlib: Registry) -> tuple[Any, Registry]:
    imported = import_hf_config(config, profiles=stdlib.profiles, name="small")
    registry = compile_sources([Source("small.hpf", imported.text)])
    return build_model(registry.models["small"], registry=registry, device="meta"), registry


def _hf_total(config: dict[str, Any]) -> int:
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config))
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("config", [_mimo, _minimax], ids=["mimo_v2_flash", "minimax_m2"])
def test_the_build_has_the_estimates_count_which_is_transformers(config: Any, stdlib: Registry) -> None:
    values = config()
    model, registry = _built(values, stdlib)
    cost = bind(registry.models["small"], registry.profiles[registry.models["small"].profile],
                families=registry.families)
    built = sum(p.numel() for p in model.parameters())
    assert built == parameters(cost).total == _hf_total(values)


def test_a_sliding_layer_is_built_with_its_kinds_head_shapes(stdlib: Registry) -> None:
    model, _ = _built(_mimo(), stdlib)
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters() if ".mixer." in name}
    assert shapes["layers.0.mixer.k_proj.weight"] == (24, 64) and "layers.0.mixer.sinks" not in shapes
    assert shapes["layers.1.mixer.k_proj.weight"] == (48, 64)  # twice the kv heads
    assert shapes["layers.1.mixer.v_proj.weight"] == (32, 64)  # two kv heads of 16
    assert shapes["layers.1.mixer.o_proj.weight"] == (64, 64)  # four value heads of 16
    assert shapes["layers.1.mixer.sinks"] == (4,)


def test_a_dense_mimo_gives_transformers_logits(stdlib: Registry) -> None:
    config = _mimo(mlp_layer_types=["dense"] * 3, attention_value_scale=None)  # v_scale 1: hpdsl scales no values
    model, _ = _built(config, stdlib)
    ours = materialize(model, "cpu", seed=0).eval()
    torch.manual_seed(0)
    hf_config = transformers.AutoConfig.for_model(**config)
    hf_config._attn_implementation = "eager"
    theirs = transformers.AutoModelForCausalLM.from_config(hf_config).float().eval()
    load_hf_state_dict(ours, theirs.state_dict(), stdlib.profile("mimo_v2"), config["model_type"], stdlib.profiles)
    ids = torch.randint(0, SMALL["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(input_ids=ids).logits, atol=1e-4, rtol=1e-4)


KINDS = """
profile shapes {{
  default full
  kind full {{ ops {{ attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }} }}
  kind other from full {{ dims {{ {dims} }} }}
}}
model m : shapes {{
  hidden 64  layers 3  heads {heads}  kv_heads {kv}  head_dim {head_dim}  {value}vocab 50  ffn_width 96
  stack [full, other * 2]
}}
"""


@settings(max_examples=12, deadline=None)
@given(kv=st.sampled_from([1, 2]), groups=st.sampled_from([1, 2]), factor=st.sampled_from([1, 2]),
       head_dim=st.sampled_from([8, 16]), value_dim=st.sampled_from([None, 4, 8]), sinks=st.booleans(),
       qk_norm=st.booleans())
def test_a_kinds_dims_are_built_as_estimated(kv: int, groups: int, factor: int, head_dim: int,
                                             value_dim: int | None, sinks: bool, qk_norm: bool) -> None:
    """Whatever head shapes a kind's dims give its layers, build_model creates the estimate's parameters."""
    heads = kv * groups * factor
    dims = f"kv_heads = {factor} * kv_heads  head_dim = head_dim / 2  attention_sinks = {int(sinks)}  " \
           f"qk_norm = {int(qk_norm)}"
    text = KINDS.format(dims=dims, heads=heads, kv=kv, head_dim=head_dim,
                        value=f"value_dim {value_dim}  " if value_dim else "")
    registry = compile_sources([Source("shapes.hpf", text)])
    model = registry.models["m"]
    cost = bind(model, registry.profiles["shapes"], families=registry.families)
    built = build_model(model, registry=registry, device="meta")
    assert sum(p.numel() for p in built.parameters()) == parameters(cost).total
