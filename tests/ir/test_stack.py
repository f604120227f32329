"""The layer-stack rules (hpdsl/ir/stack.py) against the gold stacks of docs/reference.md#reference-stacks.

Each gold stack is stated twice: through the pure functions, with a profile's
kinds given directly, and as .hpf text checked with the standard profiles.
"""

from __future__ import annotations

import pytest

from hpdsl import ast
from hpdsl.check import check_files
from hpdsl.diagnostics import Diagnostic, Source
from hpdsl.ir.nodes import LayerGroup
from hpdsl.ir.stack import (StackResult, append_mtp, derive_stack, expand_stack, explicit_body, layer_kinds,
                            merge_groups, model_stack, run_length, stack_group_count, stack_layer_count)
from hpdsl.model.fields import MAX_GROUPS
from hpdsl.resources import stdlib_files
from hpdsl.scope import Scope, profile_default, profile_kinds
from hpdsl.syntax import parse_source, parse_text

L, F = "linear_attention", "full_attention"
HYBRID = ((F, L), F)           # qwen3_5: kinds, default
DEEPSEEK = (("dense", "moe"), "moe")
T5 = (("encoder", "decoder"), "encoder")
QWEN = (("decoder",), "decoder")
VISION = (("encoder",), "encoder")


def g(kind: str, count: int, mtp: bool = False) -> LayerGroup:
    return LayerGroup(kind, count, mtp)


def names(*values: str) -> tuple[ast.Name, ...]:
    return tuple(ast.Name(value) for value in values)


def resolve(profile: tuple[tuple[str, ...], str | None], layers: int, *, types: tuple[str, ...] = (),
            first_k: int = 0, mtp: int = 0) -> StackResult:
    """Derive a body by the stack-derivation rules and append the MTP group, problems of both kept."""
    kinds, default = profile
    return derive_stack(kinds, default, layers, layer_types=names(*types), first_k_dense=first_k,
                        mtp=mtp)


def codes(result: StackResult) -> list[str]:
    return [problem.code for problem in result.problems]


# --------------------------------------------------------------------------
# Gold stacks through the pure functions
# --------------------------------------------------------------------------


def test_hybrid_layer_types_group_into_maximal_runs() -> None:
    result = resolve(HYBRID, 7, types=(L, L, L, F, L, L, F))
    assert result.groups == (g(L, 3), g(F, 1), g(L, 2), g(F, 1))
    assert not result.problems


def test_hybrid_mtp_takes_the_last_body_kind() -> None:
    assert resolve(HYBRID, 2, types=(L, F), mtp=1).groups[-1] == g(F, 1, mtp=True)


def test_layer_types_longer_than_the_model_are_cropped() -> None:
    result = resolve(HYBRID, 3, types=(L, F) * 4)
    assert sum(group.count for group in result.groups) == 3
    assert result.groups == (g(L, 1), g(F, 1), g(L, 1))


def test_layer_types_too_short_names_both_counts() -> None:
    result = resolve(HYBRID, 4, types=(L, F, L))
    assert codes(result) == ["layer-types-too-short"]
    assert "3" in result.problems[0].message and "4" in result.problems[0].message
    assert result.groups == ()


def test_unknown_layer_types_warn_and_fall_back_to_the_default() -> None:
    result = resolve(QWEN, 4, types=("chunked_attention", "global_attention") * 2)
    assert result.groups == (g("decoder", 4),)
    assert codes(result) == ["layer-types-unknown-kind"] * 2  # one per distinct name
    assert all(problem.severity == "warning" for problem in result.problems)


def test_deepseek_v3_dense_then_moe_then_mtp() -> None:
    assert resolve(DEEPSEEK, 61, first_k=3, mtp=1).groups == (
        g("dense", 3), g("moe", 58), g("moe", 1, mtp=True))


def test_deepseek_without_first_k_is_all_moe() -> None:
    assert resolve(DEEPSEEK, 8).groups == (g("moe", 8),)


def test_deepseek_all_dense_gives_a_dense_mtp_group() -> None:
    assert resolve(DEEPSEEK, 4, first_k=4, mtp=1).groups == (g("dense", 4), g("dense", 1, mtp=True))


def test_deepseek_shaped_spec() -> None:
    assert resolve(DEEPSEEK, 4, first_k=1, mtp=1).groups == (
        g("dense", 1), g("moe", 3), g("moe", 1, mtp=True))


@pytest.mark.parametrize("first_k", [-3, 0, 2, 9])
def test_first_k_dense_is_clamped(first_k: int) -> None:
    dense = min(max(first_k, 0), 5)
    expected = merge_groups((g("dense", dense), g("moe", 5 - dense)))
    assert resolve(DEEPSEEK, 5, first_k=first_k).groups == expected


def test_t5_halves() -> None:
    assert resolve(T5, 24).groups == (g("encoder", 12), g("decoder", 12))
    assert resolve(T5, 4).groups == (g("encoder", 2), g("decoder", 2))  # t5-small in docs/reference.md#reference-stacks


def test_t5_odd_layer_count_is_an_error() -> None:
    assert codes(resolve(T5, 23)) == ["odd-encoder-decoder"]


def test_one_kind_profile_with_mtp() -> None:
    assert resolve(QWEN, 32, mtp=1).groups == (g("decoder", 32), g("decoder", 1, mtp=True))


def test_vision_tower() -> None:
    assert resolve(VISION, 6).groups == (g("encoder", 6),)


def test_parser_level_qwen3_5_layer_types() -> None:
    result = resolve(HYBRID, 5, types=(L, L, F, L, F))
    assert result.groups == (g(L, 2), g(F, 1), g(L, 1), g(F, 1))
    assert [group.count for group in result.groups] == [2, 1, 1, 1]


def test_hybrid_without_layer_types_is_all_full_attention() -> None:
    assert resolve(HYBRID, 4).groups == (g(F, 4),)


def test_several_kinds_without_a_default_cannot_be_derived() -> None:
    result = resolve((("a", "b"), None), 4)
    assert codes(result) == ["stack-needs-default"]


def test_mtp_without_a_body_or_default_has_no_kind() -> None:
    assert [p.code for p in append_mtp((), 1, ("a", "b"), None).problems] == ["stack-needs-default"]
    assert append_mtp((), 2, ("a",), "a").groups == (g("a", 2, mtp=True),)


# --------------------------------------------------------------------------
# Explicit stacks
# --------------------------------------------------------------------------


def _stack(text: str) -> ast.StackList:
    model = parse_text(f"model m {{ stack {text} }}").items[0]
    assert isinstance(model, ast.Model) and isinstance(model.items[0], ast.Stack)
    return model.items[0].body


@pytest.mark.parametrize(("text", "groups"), [
    ("[a]", [("a", 1)]),
    ("[a * 3, b] * 2", [("a", 3), ("b", 1), ("a", 3), ("b", 1)]),
    ("[a, [a] * 2] * 2", [("a", 6)]),
    ("[a, [b, a] * 2, a]", [("a", 1), ("b", 1), ("a", 1), ("b", 1), ("a", 2)]),
    ("[[a * 2, b], [b * 3]]", [("a", 2), ("b", 4)]),
    ("[a * 0, b, a * 2]", [("b", 1), ("a", 2)]),
    ("[a, b * 2] * 0", []),
])
def test_explicit_stacks_expand_into_maximal_runs(text: str, groups: list[tuple[str, int]]) -> None:
    body = _stack(text)
    assert expand_stack(body) == tuple(g(kind, count) for kind, count in groups)
    assert stack_layer_count(body) == sum(count for _, count in groups)
    assert stack_group_count(body) == len(groups)  # counted without expanding


def test_a_stack_of_too_many_runs_is_refused_unexpanded() -> None:
    result = explicit_body(_stack(f"[a, b] * {2 ** 19}"), 2 ** 20)  # 2^20 layers, each its own run
    assert codes(result) == ["too-many-groups"] and result.groups == ()
    assert "1048576 runs" in result.problems[0].message
    at_cap = explicit_body(_stack(f"[a, b] * {MAX_GROUPS // 2}"), MAX_GROUPS)
    assert not at_cap.problems and len(at_cap.groups) == MAX_GROUPS


def test_layer_types_of_too_many_runs_are_refused() -> None:
    alternating = (L, F) * (MAX_GROUPS // 2) + (L,)
    result = resolve(HYBRID, len(alternating), types=alternating)
    assert codes(result) == ["too-many-groups"] and result.groups == ()
    assert len(resolve(HYBRID, MAX_GROUPS, types=alternating[:MAX_GROUPS]).groups) == MAX_GROUPS


def test_stated_stack_prices_like_the_layer_types_it_spells() -> None:
    explicit = expand_stack(_stack(f"[{L} * 3, {F}]"))
    assert explicit == resolve(HYBRID, 4, types=(L, L, L, F)).groups
    assert explicit != resolve(HYBRID, 4, types=(F,) * 4).groups


def test_run_length_and_layer_kinds_are_inverse() -> None:
    kinds = ["a", "a", "b", "a", "c", "c"]
    assert layer_kinds(run_length(kinds)) == kinds
    assert run_length([]) == ()


# --------------------------------------------------------------------------
# The same gold stacks as .hpf text, with the standard profiles
# --------------------------------------------------------------------------

DIMS = "hidden 1024  heads 8  vocab 1000  ffn_width 4096"
MOE = "moe { experts 8  top_k 2  expert_width 512  shared_experts 1 }"
LINEAR = "linear { key_heads 8  key_head_dim 64  value_heads 16  value_head_dim 64  conv 4 }"


def _checked(body: str, profile: str) -> tuple[Scope, ast.Model, tuple[Diagnostic, ...]]:
    text = f"model m : {profile} {{ {DIMS}  {body} }}"
    sources = [Source("case.hpf", text)] + [Source(n, p.read_text()) for n, p in stdlib_files()]
    files = [parse_source(source) for source in sources]
    scope, diagnostics = check_files(files)
    return scope, scope.models["m"], diagnostics


def _groups(body: str, profile: str) -> tuple[tuple[LayerGroup, ...], list[str]]:
    scope, model, diagnostics = _checked(body, profile)
    declared = scope.profiles[profile]
    result = model_stack(model, profile_kinds(declared), profile_default(declared))
    return result.groups, [d.code for d in diagnostics]


@pytest.mark.parametrize(("profile", "body", "groups"), [
    ("qwen3_5", f"layers 7 {LINEAR} layer_types [{L}, {L}, {L}, {F}, {L}, {L}, {F}]",
     [(L, 3), (F, 1), (L, 2), (F, 1)]),
    ("qwen3_5", f"layers 2 mtp 1 {LINEAR} layer_types [{L}, {F}]", [(L, 1), (F, 1), (F, 1, True)]),
    ("qwen3_5", f"layers 3 {LINEAR} layer_types [{L}, {F}, {L}, {F}, {L}, {F}, {L}, {F}]",
     [(L, 1), (F, 1), (L, 1)]),
    ("deepseek", f"layers 61 first_k_dense 3 mtp 1 {MOE}", [("dense", 3), ("moe", 58), ("moe", 1, True)]),
    ("deepseek", f"layers 8 {MOE}", [("moe", 8)]),
    ("deepseek", "layers 4 first_k_dense 4 mtp 1", [("dense", 4), ("dense", 1, True)]),
    ("t5", "layers 24", [("encoder", 12), ("decoder", 12)]),
    ("qwen", "layers 32 mtp 1", [("decoder", 32), ("decoder", 1, True)]),
    ("vision", "layers 6", [("encoder", 6)]),
    ("qwen3_5", f"layers 48 mtp 1 {LINEAR} stack [{L} * 3, {F}] * 12",
     [(L, 3), (F, 1)] * 12 + [(F, 1, True)]),
])
def test_gold_stacks_from_hpf_text(profile: str, body: str, groups: list[tuple]) -> None:
    found, diagnostics = _groups(body, profile)
    assert diagnostics == []
    assert found == tuple(g(*group) for group in groups)


def test_gold_errors_from_hpf_text() -> None:
    assert _groups(f"layers 4 {LINEAR} layer_types [{L}, {F}, {L}]", "qwen3_5")[1] == [
        "layer-types-too-short"]
    assert _groups("layers 23", "t5")[1] == ["odd-encoder-decoder"]
    warned = _groups("layers 4 layer_types [chunked_attention, global_attention, "
                     "chunked_attention, global_attention]", "qwen")
    assert warned == ((g("decoder", 4),), ["layer-types-unknown-kind"] * 2)


def test_a_stack_naming_a_kind_the_profile_lacks() -> None:
    _, _, diagnostics = _checked(f"layers 4 {MOE} stack [decoder * 4]", "deepseek")
    assert [d.code for d in diagnostics] == ["unknown-kind"]
    assert "decoder" in diagnostics[0].message and "moe" in diagnostics[0].message
