"""Estimate = build for FLOPs: an author's family with a random layout prices the weight matmuls the module runs.

Hypothesis draws a layout of matrices (a Linear's `NAME.weight`), depthwise
convolutions, expert banks and parameters that are no matmul (vectors, 2-D
states), each with an optional condition, writes it as a family and binds it to
the attention, mlp or experts slot of a two-layer model. The module
(tests/property/matmul_fixture_modules.py) runs each matmul on its tokens; one
forward pass of build_model's model on a small batch is counted with torch's
FlopCounterMode, per module. The estimate's weight-matmul FLOPs of that slot
(attMM and conv for the mixer, ffMM, with the router, for the feed-forward
block) equal the count of the modules that fill it.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layout_fixture_modules import Dim
from layout_strategies import ONE_SHARED_EXPERT, conditions, drawn_family, drawn_model, layout_line
from matmul_fixture_modules import MatmulEntry, parameter_path

from hpdsl.api import compile_sources
from hpdsl.cost import bind
from hpdsl.cost.formulas.flops import forward_flops_by_term
from hpdsl.diagnostics import Source
from hpdsl.torch import build_model, materialize
from hpdsl.torch.resolve import DEFAULT_PREFIXES

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

PREFIXES = (*DEFAULT_PREFIXES, "matmul_fixture_modules.")
NAMES = ("hidden", "heads", "head_dim", "kv_heads", "ffn_width")
FLAGS = ("qkv_bias", "mlp_bias", "o_bias")
BATCH, SEQ = 2, 6
TERMS = {"attention": ("attMM", "conv"), "mlp": ("ffMM",), "experts": ("ffMM", "router")}
MODULE = {"attention": ".mixer", "mlp": ".ffn", "experts": ".ffn"}
"""The module path whose count each slot's terms hold: the mixer, the feed-forward (an MoE: router, experts, shared)."""

sizes: st.SearchStrategy[Dim] = st.one_of(
    st.integers(1, 5).map(lambda n: ((n,),)),
    st.tuples(st.sampled_from(NAMES), st.integers(1, 2)).map(lambda t: (t,)),
    st.tuples(st.sampled_from(NAMES), st.integers(1, 3)).map(lambda t: ((t[0],), (t[1],))))


@st.composite
def entry(draw: st.DrawFn, index: int, role: str) -> MatmulEntry:
    """Draw one parameter: what the module does with it decides its shape."""
    uses = ["matmul", "vector", "state"] + (["conv"] if role == "attention" else []) + \
        (["bank"] if role == "experts" else [])
    use = draw(st.sampled_from(uses))
    if use == "conv":
        dims: tuple[Dim, ...] = (draw(sizes), ((1,),), ((draw(st.integers(1, 4)),),))
    elif use == "bank":
        dims = ((("experts",),), draw(sizes), draw(sizes))
    elif use == "vector":
        dims = (draw(sizes),)
    else:
        dims = (draw(sizes), draw(sizes))
    return f"p{index}", dims, draw(conditions(FLAGS, ("heads", "hidden"))), use


@st.composite
def layouts(draw: st.DrawFn, role: str) -> tuple[MatmulEntry, ...]:
    """Draw 1 to 4 parameters p0, p1, ... for a family in `role`."""
    return tuple(draw(entry(i, role)) for i in range(draw(st.integers(1, 4))))


def family_text(spec: tuple[MatmulEntry, ...]) -> str:
    """Return the drawn layout as an .hpf family whose one variant builds DrawnMatmuls."""
    return drawn_family("matmul_fixture_modules:DrawnMatmuls", "spec", [name for name, _, _, _ in spec],
                        [layout_line(parameter_path(name, use), dims, condition)
                         for name, dims, condition, use in spec])


def model_text(role: str, flags: dict[str, bool], hidden: int) -> str:
    """Return a profile binding `drawn` to `role` and a two-layer model that has that slot."""
    blocks = ONE_SHARED_EXPERT if role == "experts" else ""
    return drawn_model(role, flags, f"hidden {hidden}  heads 4  kv_heads 2", blocks)


def counted(model: object, suffix: str) -> int:
    """Return FlopCounterMode's count of one forward pass in the modules whose path ends in `suffix`."""
    materialize(model, "cpu", seed=0)  # type: ignore[arg-type]
    ids = torch.randint(0, 40, (BATCH, SEQ))
    with FlopCounterMode(display=False) as counter:
        model(ids)  # type: ignore[operator]
    return sum(sum(ops.values()) for name, ops in counter.get_flop_counts().items() if name.endswith(suffix))


@settings(max_examples=15, deadline=None)
@given(data=st.data(), role=st.sampled_from(sorted(TERMS)),
       flags=st.fixed_dictionaries({name: st.booleans() for name in FLAGS}), hidden=st.sampled_from((16, 32)))
def test_the_estimated_weight_matmuls_of_a_drawn_layout_are_what_the_module_runs(
        data: st.DataObject, role: str, flags: dict[str, bool], hidden: int) -> None:
    spec = data.draw(layouts(role))
    registry = compile_sources([Source("drawn.hpf", family_text(spec) + model_text(role, flags, hidden))])
    model = registry.model("drawn_model")
    cost = bind(model, registry.profile(model.profile), families=registry.families)
    terms = forward_flops_by_term(cost, batch=BATCH, seq_len=SEQ)
    estimate = sum(terms[kind or "layer"][term] for kind in cost.layer_kinds() for term in TERMS[role])
    built = build_model(model, registry=registry, allowed_prefixes=PREFIXES, selectors={role: {"spec": spec}})
    assert counted(built, MODULE[role]) == estimate


def test_a_matrix_that_is_no_module_weight_is_no_matmul() -> None:
    """A 2-D parameter not at a submodule's `weight` (a state, a decay) is held, not multiplied: no FLOPs."""
    spec: tuple[MatmulEntry, ...] = (("p0", ((("hidden",),), (("ffn_width",),)), None, "state"),
                                     ("p1", ((("ffn_width",),), (("hidden",),)), None, "matmul"))
    registry = compile_sources([Source("drawn.hpf", family_text(spec) + model_text("mlp", {}, 16))])
    model = registry.model("drawn_model")
    terms = forward_flops_by_term(bind(model, registry.profile(model.profile), families=registry.families),
                                  batch=BATCH, seq_len=SEQ)
    assert terms["layer"]["ffMM"] == 2 * BATCH * SEQ * 48 * 16  # p1 alone
    built = build_model(model, registry=registry, allowed_prefixes=PREFIXES, selectors={"mlp": {"spec": spec}})
    assert counted(built, ".ffn") == 2 * terms["layer"]["ffMM"]  # two layers
