"""Binding invariants: kinds applied in place, in any order, give fresh configs.

See docs/reference.md#binding-is-order-independent.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from blocks import linear, mla, moe
from hpdsl.cost import bind
from hpdsl.ir.nodes import KindIR, LayerGroup, ModelIR, ProfileIR, evolve
from hpdsl.ir.stack import layer_kinds, merge_groups, run_length

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
def test_kinds_applied_in_any_order_give_every_layer_its_fresh_config(cost_model, data) -> None:
    # Upstream applies each layer's kind to one shared config in stack order; the fields a
    # BoundKind assigns are complete, so whatever ran before, a layer ends with its own config.
    layers = list(cost_model.layer_kinds())
    order = data.draw(st.permutations(layers))
    state = cost_model.base
    for kind in order:
        if kind is not None:
            state = evolve(state, **cost_model.kinds[kind].fields)
        assert state == cost_model.kind_config(kind)


@given(bound_models())
def test_layer_groups_and_per_layer_kinds_round_trip_mtp_included(cost_model) -> None:
    model = cost_model.model
    kinds = layer_kinds(model.groups)
    body, mtp = kinds[:model.layers], kinds[model.layers:]
    regrouped = (*run_length(body), *(LayerGroup(g.kind, g.count, True) for g in run_length(mtp)))
    assert regrouped == merge_groups(model.groups)
    assert list(cost_model.layer_kinds()) == (kinds if cost_model.kinds and cost_model.groups[0].kind is not None
                                              else [None] * len(kinds))


@given(bound_models())
def test_groups_cover_every_layer(cost_model) -> None:
    model = cost_model.model
    assert len(cost_model.layer_kinds()) == model.layers + model.mtp
    if len(cost_model.groups) > 1 or cost_model.groups[0].kind is not None:
        assert [g.kind for g in cost_model.groups] == [g.kind for g in model.groups]
