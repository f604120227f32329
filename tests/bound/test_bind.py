"""Unit tests of binding: the gold values of docs/reference.md#kind-binding and
docs/reference.md#reference-stacks."""

from __future__ import annotations

from blocks import linear, mla, moe
from hpdsl.bound.bind import linear_attention_fields
from hpdsl.cost import bind
from hpdsl.ir.nodes import DimIR, KindIR, LayerGroup, ModelIR, ProfileIR, evolve

OPS = dict.fromkeys(("attMM", "attBMM", "ffMM", "softmax", "dropout", "normOp", "gather",
                     "headCast", "ffAct", "linrec"), 1)


def test_linear_attention_gold() -> None:
    model = ModelIR("m", "p", hidden=1024, layers=1, heads=16, vocab=10, **linear(8, 64, 16, 64, 4))
    fields = linear_attention_fields(model)
    assert (fields["attn_kind"], fields["heads"], fields["head_dim"]) == ("linear", 16, 64)
    assert fields["kv_heads"] == 8 and fields["output_gate"] is True
    assert fields["qk_norm"] is False
    assert fields["attn_extra_params"] == 41056  # 40960 + 2·n_v + d_v (docs/reference.md#parameter-formulas)


def _deepseek_shaped() -> tuple[ModelIR, ProfileIR]:
    profile = ProfileIR("deepseek", {"dense": KindIR("dense", OPS, "full", "dense"),
                                     "moe": KindIR("moe", OPS, "full", "moe")}, default="moe")
    model = ModelIR("ds", "deepseek", hidden=1024, layers=4, heads=8, vocab=100, ffn_width=2816,
                    mtp=1, first_k_dense=1, **moe(8, 2, 512, 1),
                    groups=(LayerGroup("dense", 1), LayerGroup("moe", 3), LayerGroup("moe", 1, True)))
    return model, profile


def test_dense_and_moe_kinds_write_complete_ffn_fields() -> None:
    cost = bind(*_deepseek_shaped())
    dense, moe = cost.kinds["dense"].fields, cost.kinds["moe"].fields
    assert {k: dense[k] for k in ("ffn_width", "top_k", "experts", "shared_experts", "ep")} == \
        {"ffn_width": 2816, "top_k": 1, "experts": 1, "shared_experts": 0, "ep": 1}
    assert {k: moe[k] for k in ("ffn_width", "top_k", "experts", "shared_experts", "ep")} == \
        {"ffn_width": 512, "top_k": 2, "experts": 8, "shared_experts": 1, "ep": None}
    state = cost.base
    for kind in ("dense", "moe", "dense"):
        state = evolve(state, **cost.kinds[kind].fields)
    assert state == cost.layer_config(0)
    assert [g.kind for g in cost.groups] == ["dense", "moe", "moe"]
    assert cost.layer_kinds() == ("dense", "moe", "moe", "moe", "moe")


def test_one_kind_that_changes_nothing_is_one_group_of_all_layers() -> None:
    profile = ProfileIR("qwen", {"decoder": KindIR("decoder", OPS)}, default="decoder")
    model = ModelIR("q", "qwen", hidden=64, layers=32, heads=4, vocab=10, mtp=1,
                    groups=(LayerGroup("decoder", 32), LayerGroup("decoder", 1, True)))
    cost = bind(model, profile)
    assert [(g.kind, g.count, g.mtp) for g in cost.groups] == [(None, 33, False)]




def _sliding_dims() -> tuple[ModelIR, ProfileIR]:
    """MiMo-V2-Flash-shaped kinds: the sliding one doubles the kv heads and has sinks (profiles/mimo_v2.hpf)."""
    doubled = DimIR("product", operands=(DimIR("int", value=2), DimIR("name", name="kv_heads")), text="2 * kv_heads")
    profile = ProfileIR("p", {"full": KindIR("full", OPS),
                              "sliding": KindIR("sliding", OPS, "sliding", dims={
                                  "kv_heads": doubled, "attention_sinks": DimIR("int", value=1, text="1")})},
                        default="full")
    model = ModelIR("m", "p", hidden=256, layers=3, heads=8, kv_heads=2, vocab=10, ffn_width=512, sliding_window=16,
                    groups=(LayerGroup("full", 1), LayerGroup("sliding", 2)))
    return model, profile


def test_a_kinds_dims_set_its_layers_fields_and_every_kind_writes_them() -> None:
    cost = bind(*_sliding_dims())
    full, sliding = cost.kind_config("full"), cost.kind_config("sliding")
    assert (full.kv_heads, full.attention_sinks) == (2, False)
    assert (sliding.kv_heads, sliding.attention_sinks, sliding.window) == (4, True, 16)
    assert {"kv_heads", "attention_sinks"} <= set(cost.kinds["full"].fields)  # the base values, written


def test_a_single_kind_with_dims_is_bound_as_its_kind() -> None:
    model, profile = _sliding_dims()
    profile = evolve(profile, kinds={"full": evolve(profile.kinds["sliding"], name="full", attention="full")})
    cost = bind(evolve(model, groups=(LayerGroup("full", 3),)), profile)
    assert cost.kind_config(cost.groups[0].kind).kv_heads == 4
