"""Binding invariants: kinds applied in place, in any order, give fresh configs.

See docs/reference.md#binding-is-order-independent.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from blocks import linear, mla, moe
from hpdsl.cost import bind
from hpdsl.ir.nodes import KindIR, LayerGroup, ModelIR, ProfileIR

OPS = ("attMM", "attBMM", "ffMM", "softmax", "dropout", "normOp", "gather", "headCast", "ffAct", "linrec")
positive = st.integers(1, 64)


@st.composite
def kinds(draw: st.DrawFn) -> dict[str, KindIR]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True))
    out = {}
    for name in names:
        ops = {op: draw(st.integers(0, 8)) for op in OPS}
        attention = draw(st.sampled_from(["full", "linear"]))
        ffn = draw(st.sampled_from([None, "dense", "moe"]))
        out[name] = KindIR(name, ops, attention, ffn)
    return out


@st.composite
def bound_models(draw: st.DrawFn):
    profile_kinds = draw(kinds())
    names = list(profile_kinds)
    body = draw(st.lists(st.tuples(st.sampled_from(names), st.integers(1, 5)), min_size=1, max_size=6))
    mtp = draw(st.integers(0, 2))
    groups = [LayerGroup(k, c) for k, c in body]
    if mtp:
        groups.append(LayerGroup(body[-1][0], mtp, True))
    heads = draw(positive)
    model = ModelIR(
        name="m", profile="p", hidden=draw(positive) * 8, layers=sum(c for _, c in body),
        heads=heads, vocab=draw(positive), kv_heads=draw(st.sampled_from([None, 1, heads])),
        ffn_width=draw(positive), mtp=mtp, qk_norm=draw(st.booleans()),
        **moe(draw(st.integers(2, 16)), 2, draw(positive), draw(st.integers(0, 2))),
        **linear(draw(positive), draw(positive), draw(positive), draw(positive), 4),
        groups=tuple(groups))
    profile = ProfileIR("p", profile_kinds, default=draw(st.sampled_from(names)))
    return bind(model, profile)


@given(bound_models(), st.data())
def test_in_place_application_matches_fresh(cost_model, data) -> None:
    names = list(cost_model.kinds)
    state = cost_model.mutable_config()
    for kind in data.draw(st.lists(st.sampled_from(names), max_size=12)):
        state.apply(kind)
        assert state.freeze() == cost_model.kind_config(kind)


@given(bound_models())
def test_groups_cover_every_layer(cost_model) -> None:
    model = cost_model.model
    assert len(cost_model.layer_kinds()) == model.layers + model.mtp
    if len(cost_model.groups) > 1 or cost_model.groups[0].kind is not None:
        assert [g.kind for g in cost_model.groups] == [g.kind for g in model.groups]
