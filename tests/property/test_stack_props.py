"""Invariants of stack derivation and expansion (docs/reference.md#derived-stacks-cover-the-model,
docs/reference.md#split-rules).

Derived stacks cover the model exactly, MTP groups come last, no group is empty
and groups are maximal runs; dense/moe and encoder/decoder splits follow the
clamp and halving rules; an explicit nested stack expands to what expanding it
layer by layer and run-length encoding gives.
"""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from hpdsl import ast
from hpdsl.diagnostics.span import Span
from hpdsl.ir.nodes import LayerGroup
from hpdsl.ir.stack import (StackResult, append_mtp, derive_body, derive_stack, expand_stack, layer_kinds,
                            run_length, stack_layer_count)

KIND_NAMES = ("a", "b", "c", "dense", "moe", "encoder", "decoder")

# A profile's kinds (in declaration order, no repeats) and its default kind.
kind_sets = st.lists(st.sampled_from(KIND_NAMES), min_size=1, max_size=4, unique=True)


@st.composite
def profiles(draw: st.DrawFn) -> tuple[tuple[str, ...], str | None]:
    kinds = tuple(draw(kind_sets))
    default = draw(st.sampled_from(kinds + (None,)))
    if len(kinds) == 1 and draw(st.booleans()):
        default = kinds[0]  # a one-kind profile defaults to it
    return kinds, default


def _names(values: list[str]) -> tuple[ast.Name, ...]:
    return tuple(ast.Name(value) for value in values)


def _resolve(kinds: tuple[str, ...], default: str | None, layers: int, *, types: list[str],
             first_k: int, mtp: int) -> StackResult:
    return derive_stack(kinds, default, layers, layer_types=_names(types), first_k_dense=first_k,
                        mtp=mtp)


def _errors(result: StackResult) -> list[str]:
    return [p.code for p in result.problems if p.severity == "error"]


def _assert_maximal(groups: tuple[LayerGroup, ...]) -> None:
    for left, right in zip(groups, groups[1:]):
        assert (left.kind, left.mtp) != (right.kind, right.mtp)


# --------------------------------------------------------------------------
# Item 2: stack coverage
# --------------------------------------------------------------------------


@given(profiles(), st.integers(1, 64), st.lists(st.sampled_from(KIND_NAMES), max_size=70),
       st.integers(-4, 70), st.integers(0, 3))
def test_derived_stacks_cover_the_model(profile: tuple[tuple[str, ...], str | None], layers: int,
                                        types: list[str], first_k: int, mtp: int) -> None:
    kinds, default = profile
    result = _resolve(kinds, default, layers, types=types, first_k=first_k, mtp=mtp)
    assume(not _errors(result))
    body = [group for group in result.groups if not group.mtp]
    extra = [group for group in result.groups if group.mtp]
    assert sum(group.count for group in body) == layers
    assert sum(group.count for group in extra) == mtp
    assert result.groups[:len(body)] == tuple(body)  # MTP groups last
    assert len(extra) == (1 if mtp else 0)
    assert all(group.count > 0 for group in result.groups)
    _assert_maximal(tuple(body))


@given(st.lists(st.sampled_from(("x", "y", "z")), min_size=1, max_size=40), st.integers(1, 40))
def test_layer_types_group_into_maximal_runs(types: list[str], layers: int) -> None:
    result = derive_body(("x", "y", "z"), "x", layers, layer_types=_names(types))
    if len(types) < layers:
        assert [p.code for p in result.problems] == ["layer-types-too-short"]
        assert result.groups == ()
        return
    assert not result.problems
    assert layer_kinds(result.groups) == types[:layers]
    _assert_maximal(result.groups)


@given(st.lists(st.sampled_from(("x", "y", "nope", "other")), min_size=1, max_size=20))
def test_unknown_layer_types_warn_and_price_every_layer_as_the_default(types: list[str]) -> None:
    result = derive_body(("x", "y"), "y", len(types), layer_types=_names(types))
    unknown = [name for name in dict.fromkeys(types) if name not in ("x", "y")]
    assert [p.message.split("'")[1] for p in result.problems] == unknown
    assert all(p.severity == "warning" for p in result.problems)
    if unknown:
        assert result.groups == (LayerGroup("y", len(types)),)


# --------------------------------------------------------------------------
# Item 3: dense/moe split, MTP kind, encoder/decoder halves
# --------------------------------------------------------------------------


@given(st.integers(1, 200), st.integers(-10, 250), st.integers(0, 3))
def test_dense_is_first_k_clamped(layers: int, first_k: int, mtp: int) -> None:
    result = _resolve(("dense", "moe"), "moe", layers, types=[], first_k=first_k, mtp=mtp)
    dense = min(max(first_k, 0), layers)
    counts = {kind: sum(g.count for g in result.groups if g.kind == kind and not g.mtp)
              for kind in ("dense", "moe")}
    assert counts == {"dense": dense, "moe": layers - dense}
    if mtp:
        body_last = [g for g in result.groups if not g.mtp][-1]
        assert result.groups[-1] == LayerGroup(body_last.kind, mtp, mtp=True)


@given(st.integers(1, 200), st.integers(0, 2))
def test_encoder_decoder_halves_exist_iff_the_count_is_even(layers: int, mtp: int) -> None:
    result = _resolve(("decoder", "encoder"), None, layers, types=[], first_k=0, mtp=mtp)
    if layers % 2:
        assert _errors(result) == ["odd-encoder-decoder"]
        return
    half = layers // 2
    body = (LayerGroup("encoder", half), LayerGroup("decoder", half))
    assert result.groups[:2] == body and not result.problems
    assert result.groups[2:] == ((LayerGroup("decoder", mtp, mtp=True),) if mtp else ())


@given(profiles(), st.integers(1, 3))
def test_mtp_after_an_empty_body_takes_the_default(profile: tuple[tuple[str, ...], str | None],
                                                   mtp: int) -> None:
    kinds, default = profile
    result = append_mtp((), mtp, kinds, default)
    if default is None:
        assert [p.code for p in result.problems] == ["stack-needs-default"]
    else:
        assert result.groups == (LayerGroup(default, mtp, mtp=True),)


# --------------------------------------------------------------------------
# Explicit nested stacks
# --------------------------------------------------------------------------

_SPAN = Span("<prop>", 1, 1, 1, 2)
repeats = st.one_of(st.none(), st.integers(0, 4).map(lambda n: ast.Literal(n, "int", span=_SPAN)))
stack_kinds = st.builds(ast.StackKind, st.sampled_from(("a", "b", "c")).map(ast.Name), repeats)
stack_items = st.recursive(
    stack_kinds,
    lambda children: st.builds(ast.StackList, st.lists(children, min_size=1, max_size=4).map(tuple),
                               repeats),
    max_leaves=12)
stack_bodies = st.builds(ast.StackList, st.lists(stack_items, min_size=1, max_size=4).map(tuple),
                         repeats)


def _per_layer(item: ast.StackList | ast.StackKind) -> list[str]:
    """Expand a stack one layer at a time: the reference for expand_stack."""
    times = 1 if item.repeat is None else int(item.repeat.value)
    if isinstance(item, ast.StackKind):
        return [item.kind.value] * times
    once = [kind for child in item.items for kind in _per_layer(child)]
    return once * times


@given(stack_bodies)
def test_expanding_a_stack_equals_run_length_of_its_layers(body: ast.StackList) -> None:
    layers = _per_layer(body)
    assert expand_stack(body) == run_length(layers)
    assert stack_layer_count(body) == len(layers)
    assert layer_kinds(expand_stack(body)) == layers


@given(st.lists(st.sampled_from(("a", "b")), max_size=30))
def test_run_length_round_trips(kinds: list[str]) -> None:
    groups = run_length(kinds)
    assert layer_kinds(groups) == kinds
    assert run_length(layer_kinds(groups)) == groups
    _assert_maximal(groups)
