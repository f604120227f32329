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
from layout_fixture_modules import Entry, dim_value, holds
from layout_slots import FLAGS, dims, model_text
from layout_strategies import conditions, drawn_family, layout_line

from hpdsl.api import compile_sources
from hpdsl.cost import bind, parameters
from hpdsl.diagnostics import Source
from hpdsl.errors import BuildError
from hpdsl.torch import build_model, collect_family_modules
from hpdsl.torch.resolve import DEFAULT_PREFIXES

PREFIXES = (*DEFAULT_PREFIXES, "layout_fixture_modules.")
SLOT_ROLES = ("embedding", "head", "norm", "attention", "mlp", "experts", "shared_experts", "ssm", "mtp_proj")


@st.composite
def layouts(draw: st.DrawFn) -> tuple[Entry, ...]:
    """Draw 1 to 4 parameters p0, p1, ... with 1 to 3 dims each and an optional condition."""
    count = draw(st.integers(1, 4))
    when = conditions(FLAGS, ("heads", "kv_heads", "hidden"))
    return tuple((f"p{i}", tuple(draw(st.lists(dims, min_size=1, max_size=3))), draw(when)) for i in range(count))


def family_text(spec: tuple[Entry, ...]) -> str:
    """Return the drawn layout as an .hpf family."""
    return drawn_family("layout_fixture_modules:Drawn", "spec, stray", [name for name, _, _ in spec],
                        [layout_line(name, shape, condition) for name, shape, condition in spec])


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
