"""An author's family with random cost terms bound to the ssm slot: the estimate's FLOP terms are its terms.

The family's `cost { }` block (docs/language.md, "Cost terms") is compiled from
text, bound through a profile's `slots { ssm ... }`, and its terms read back
from the pricing column; each must equal the declared expression evaluated by
hand on the drawn dims, per token (t) and per attended key (ts).
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings, strategies as st

from hpdsl.api import compile_sources
from hpdsl.bound.bind import bind
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.flops import layer_flop_terms
from hpdsl.diagnostics import Source
from own_ssm import own_ssm_source

def _source(a: int, b: int, c: int, d: int, hidden: int, state: int, expand: int) -> str:
    cost = (f"    flops scan       = {a} * ssm_expand * hidden * ssm_state / {b} + {c} * hidden * keys\n"
            f"    flops scanUpdate = {d} * ssm_state + hidden * keys recompute selective\n"
            f"    flops scanUpdate = {d} * hidden if ssm_proj_bias")
    return own_ssm_source(("replicate", "replicate"), cost, hidden, state, expand)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 9), st.integers(1, 7), st.integers(0, 5), st.integers(0, 9),
       st.sampled_from([16, 32, 48]), st.integers(1, 16), st.integers(1, 3))
def test_declared_terms_are_what_the_estimate_prices(a: int, b: int, c: int, d: int, hidden: int, state: int,
                                                    expand: int) -> None:
    registry = compile_sources([Source("own.hpf", _source(a, b, c, d, hidden, state, expand))])
    cost = bind(registry.models["m"], registry.profile("own"), families=registry.families)
    column = model_columns(cost).layer_column("layer")
    assert column.config is not None
    terms = layer_flop_terms(column.config, column.matmuls)
    scan = Fraction(a * expand * hidden * state, b)
    assert terms["scan"].t == float(scan) and terms["scan"].ts == c * hidden
    assert terms["scan"].sel_ts == 0  # no `recompute selective`
    # Two entries of one name add; the `if` leaves the second out (ssm_proj_bias unset).
    assert terms["scanUpdate"].t == d * state and terms["scanUpdate"].ts == hidden == terms["scanUpdate"].sel_ts
