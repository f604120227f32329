"""An author's family in any slot is priced from its layout, and the build holds the module to it.

Two modules the standard families do not model, written as .hpf families and
fixture modules (tests/torch/torch_fixture_modules.py): OPT-350m's projected
embedding (a (vocab, hidden / 2) table and project_in, transformers'
OPTDecoder with word_embed_proj_dim = hidden / 2) bound to `embedding`, and
RWKV-4's channel mix (token-shift mixes, key, receptance, value) bound to `mlp`.
The estimate is what the layouts say and what build_model creates; a module
whose parameters differ from its layout is refused, naming both.
"""

from __future__ import annotations

import pytest

from hpdsl.api import compile_sources
from hpdsl.cost import bind, parameters
from hpdsl.cost.formulas.flops import forward_flops_by_term
from hpdsl.diagnostics import Source
from hpdsl.errors import BuildError
from hpdsl.registry import Registry
from hpdsl.torch import build_model, materialize
from hpdsl.torch.resolve import DEFAULT_PREFIXES

PREFIXES = (*DEFAULT_PREFIXES, "torch_fixture_modules.")
VECTOR = "attMM 4  attBMM 2  ffMM 2  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0"
H, LAYERS, HEADS, VOCAB, WIDTH = 64, 2, 4, 200, 256

SPEC = f"""
family projected_embedding {{
  factory "torch_fixture_modules:ProjectedEmbedding"
  variant table "torch_fixture_modules:ProjectedEmbedding" default params(table, project_in)
  layout {{
    table.weight      (vocab, hidden / 2)  replicate
    project_in.weight (hidden, hidden / 2) replicate
  }}
}}

family channel_mix {{
  factory "torch_fixture_modules:{{module}}"
  variant rwkv4 "torch_fixture_modules:{{module}}" default params(time_mix_k, time_mix_r, key, receptance, value)
  layout {{
    time_mix_k        (hidden)            replicate
    time_mix_r        (hidden)            replicate
    key.weight        (ffn_width, hidden) replicate
    receptance.weight (hidden, hidden)    replicate
    value.weight      (hidden, ffn_width) replicate
    {{extra}}
  }}
}}

profile authors {{
  default layer
  slots {{ embedding projected_embedding  mlp channel_mix }}
  kind layer {{ ops {{ {VECTOR} }} }}
}}

model small : authors {{
  hidden {H}  layers {LAYERS}  heads {HEADS}  vocab {VOCAB}  ffn_width {WIDTH}  mlp plain
}}
"""


def _registry(module: str = "ChannelMix", extra: str = "") -> Registry:
    text = SPEC.replace("{module}", module).replace("{extra}", extra)
    if extra:
        text = text.replace("params(time_mix_k, time_mix_r, key, receptance, value)",
                            "params(time_mix_k, time_mix_r, key, receptance, value, value.bias)")
    return compile_sources([Source("authors.hpf", text)])


def _built_count(registry: Registry) -> int:
    built = build_model("small", registry=registry, allowed_prefixes=PREFIXES)
    return sum(p.numel() for p in built.parameters())


def test_the_estimate_is_the_layouts_sum_and_the_built_count() -> None:
    registry = _registry()
    model = registry.model("small")
    report = parameters(bind(model, registry.profile(model.profile), families=registry.families))
    attention = 4 * H * H  # q, k, v, o of the standard attention family
    channel_mix = 2 * H + WIDTH * H + H * H + H * WIDTH
    embedding = VOCAB * H // 2 + H * H // 2
    assert report.embedding == embedding
    assert report.per_kind["layer"].dense_ffn == channel_mix
    assert report.per_kind["layer"].attention == attention
    head, final_norm, norms = VOCAB * H, H, 2 * H
    assert report.total == embedding + LAYERS * (attention + channel_mix + norms) + final_norm + head
    assert _built_count(registry) == report.total


def test_without_the_layouts_the_old_formulas_were_off() -> None:
    """The standard formulas (a vocab × hidden table, a plain MLP's 2·h·w) miss what these modules hold."""
    registry = _registry()
    model = registry.model("small")
    report = parameters(bind(model, registry.profile(model.profile), families=registry.families))
    formula = VOCAB * H + LAYERS * (4 * H * H + 2 * H * WIDTH + 2 * H) + H + VOCAB * H
    assert report.total - formula == LAYERS * (H * H + 2 * H) + H * H // 2 - VOCAB * H // 2


def test_a_module_creating_a_parameter_its_layout_does_not_declare_is_refused() -> None:
    with pytest.raises(BuildError, match=r"parameter 'value.bias' of variant 'rwkv4' has no layout entry"):
        _built_count(_registry("ChannelMixWithBias"))


def test_a_module_lacking_a_declared_parameter_is_refused_naming_both() -> None:
    with pytest.raises(BuildError, match=r"declares parameter 'receptance.weight' \(hidden, hidden\).*has no "
                                         r"'receptance.weight'"):
        _built_count(_registry("ChannelMixWithoutReceptance"))


def test_a_parameter_created_when_its_entry_condition_fails_is_refused() -> None:
    registry = _registry("ChannelMixWithBias", "value.bias (hidden) replicate if mlp_bias")
    model = registry.model("small")
    report = parameters(bind(model, registry.profile(model.profile), families=registry.families))
    assert report.per_kind["layer"].dense_ffn == 2 * H + WIDTH * H + H * H + H * WIDTH  # no mlp_bias: no bias
    with pytest.raises(BuildError, match=r"creates parameter 'value.bias', but its layout entry 'value.bias' is "
                                         r"present only if mlp_bias"):
        _built_count(registry)


def _counted(registry: Registry, batch: int, seq: int) -> dict[str, int]:
    """Return FlopCounterMode's count of one forward pass of the built model, by module path."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    built = materialize(build_model("small", registry=registry, allowed_prefixes=PREFIXES), "cpu", seed=0)
    with FlopCounterMode(display=False) as counter:
        built(torch.randint(0, VOCAB, (batch, seq)))
    return {name.split(".", 1)[-1]: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}


def test_the_weight_matmuls_are_the_layouts_and_what_the_modules_run() -> None:
    """ffMM is the channel mix's key, receptance and value (not a plain MLP's 2·h·w); the embedding's
    project_in runs."""
    registry = _registry()
    model = registry.model("small")
    batch, seq = 2, 5
    terms = forward_flops_by_term(bind(model, registry.profile(model.profile), families=registry.families),
                                  batch=batch, seq_len=seq)
    tokens = batch * seq
    assert terms["layer"]["ffMM"] == 2 * tokens * (WIDTH * H + H * H + H * WIDTH)
    assert terms["embedding"]["embedding"] == 2 * tokens * H * H // 2  # project_in; the table is a lookup
    assert terms["output"]["output"] == 2 * tokens * VOCAB * H
    counted = _counted(registry, batch, seq)
    assert counted["layers.0.ffn"] == counted["layers.1.ffn"] == terms["layer"]["ffMM"]
    assert counted["embed"] == terms["embedding"]["embedding"]
    assert counted["head"] == terms["output"]["output"]
