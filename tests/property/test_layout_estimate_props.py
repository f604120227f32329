"""Estimate = build by construction: an author's family with a random layout, bound to any slot.

Hypothesis draws a layout (parameters with random shapes over the slot config's
dims and random flag or size conditions), writes it as a family, binds it to
one slot in turn (embedding, head, norm, attention, mlp, experts,
shared_experts, ssm, an MTP layer's mtp_proj) and builds the model with a module that creates exactly
what the drawn spec says on its config (tests/property/layout_fixture_modules.py,
evaluated apart from hpdsl's layout code). The estimator's count, priced from
the layout alone, equals build_model's (MTP layers included); a module that creates one parameter
more is refused.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from layout_fixture_modules import Condition, Dim, Entry, dim_value, holds

from hpdsl.api import compile_sources
from hpdsl.cost import bind, parameters
from hpdsl.diagnostics import Source
from hpdsl.errors import BuildError
from hpdsl.torch import build_model, collect_family_modules
from hpdsl.torch.resolve import DEFAULT_PREFIXES

PREFIXES = (*DEFAULT_PREFIXES, "layout_fixture_modules.")
SLOT_ROLES = ("embedding", "head", "norm", "attention", "mlp", "experts", "shared_experts", "ssm", "mtp_proj")
INTS = ("hidden", "heads", "head_dim", "kv_heads", "ffn_width", "vocab")
FLAGS = ("qkv_bias", "mlp_bias", "o_bias", "norm_bias")
VECTOR = "attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0"

factors = st.one_of(st.sampled_from(INTS), st.integers(1, 3))
dims: st.SearchStrategy[Dim] = st.lists(st.lists(factors, min_size=1, max_size=2).map(tuple),
                                        min_size=1, max_size=2).map(tuple)
conditions: st.SearchStrategy[Condition] = st.one_of(
    st.none(), st.tuples(st.sampled_from(FLAGS), st.booleans()),
    st.tuples(st.sampled_from(("heads", "kv_heads", "hidden")), st.sampled_from((1, 2, 16))))


@st.composite
def layouts(draw: st.DrawFn) -> tuple[Entry, ...]:
    """Draw 1 to 4 parameters p0, p1, ... with 1 to 3 dims each and an optional condition."""
    count = draw(st.integers(1, 4))
    return tuple((f"p{i}", tuple(draw(st.lists(dims, min_size=1, max_size=3))), draw(conditions))
                 for i in range(count))


def family_text(spec: tuple[Entry, ...]) -> str:
    """Return the drawn layout as an .hpf family."""
    lines = [f"    {name} ({', '.join(_dim(d) for d in shape)}) replicate{_if(condition)}"
             for name, shape, condition in spec]
    params = ", ".join(name for name, _, _ in spec)
    return ('family drawn {\n  factory "layout_fixture_modules:Drawn"\n'
            f'  variant only "layout_fixture_modules:Drawn" default accepts(spec, stray) params({params})\n'
            "  layout {\n" + "\n".join(lines) + "\n  }\n}\n")


def _dim(dim: Dim) -> str:
    return " + ".join(" * ".join(str(f) for f in term) for term in dim)


def _if(condition: Condition) -> str:
    if condition is None:
        return ""
    name, value = condition
    if isinstance(value, bool):
        return f" if {name}" if value else f" if not {name}"
    return f" if {name} > {value}"


def model_text(role: str, flags: dict[str, bool], hidden: int, heads: int) -> str:
    """Return a profile binding `drawn` to `role` and a two-layer model that has that slot."""
    attention = "  attention ssm" if role == "ssm" else ""
    stated = "  ".join(name for name, on in flags.items() if on)
    blocks = {"experts": "moe { experts 4  top_k 2  expert_width 24  shared_experts 1  shared_width 40 }",
              "shared_experts": "moe { experts 4  top_k 2  expert_width 24  shared_experts 2  shared_width 40 }",
              "ssm": "ssm { ssm_state 4  ssm_conv 4  ssm_expand 2 }"}.get(role, "")
    return (f"profile drawn_profile {{\n  default layer\n  slots {{ {role} drawn }}\n"
            f"  kind layer {{\n{attention}\n    ops {{ attMM 4  {VECTOR} }}\n  }}\n}}\n"
            f"model drawn_model : drawn_profile {{\n  hidden {hidden}  layers 2  heads {heads}  vocab 40"
            f"  ffn_width 48{'  mtp 1' if role == 'mtp_proj' else ''}\n  {stated}\n  {blocks}\n}}\n")


@settings(max_examples=12, deadline=None)
@given(role=st.sampled_from(SLOT_ROLES), spec=layouts(),
       flags=st.fixed_dictionaries({name: st.booleans() for name in FLAGS}),
       hidden=st.sampled_from((16, 32)), heads=st.sampled_from((2, 4)))
@example(role="mtp_proj", spec=(("p0", ((("hidden",),), ((2, "hidden"),)), ("norm_bias", True)),),
         flags=dict.fromkeys(FLAGS, True), hidden=16, heads=2)
def test_the_estimate_of_a_drawn_layout_in_any_slot_is_the_built_count(
        role: str, spec: tuple[Entry, ...], flags: dict[str, bool], hidden: int, heads: int) -> None:
    registry = compile_sources([Source("drawn.hpf", family_text(spec) + model_text(role, flags, hidden, heads))])
    model = registry.model("drawn_model")
    report = parameters(bind(model, registry.profile(model.profile), families=registry.families))
    built = build_model(model, registry=registry, allowed_prefixes=PREFIXES, selectors={role: {"spec": spec}},
                        include_mtp=True)
    assert sum(p.numel() for p in built.parameters()) == report.total + report.mtp
    drawn = [b for b in collect_family_modules(built) if b.info.resolved.family.name == "drawn"]
    assert drawn, f"no module of the {role} slot was built from the drawn family"
    for found in drawn:  # each holds exactly what the spec says on its own config
        expected = sum(math.prod(dim_value(d, found.info.config) for d in shape)
                       for _, shape, condition in spec if holds(condition, found.info.config))
        assert sum(p.numel() for p in found.module.parameters()) == expected
    with pytest.raises(BuildError, match="'stray'"):
        build_model(model, registry=registry, allowed_prefixes=PREFIXES,
                    selectors={role: {"spec": spec, "stray": True}}, include_mtp=True)
