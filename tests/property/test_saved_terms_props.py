"""An author's family with random `saved` terms bound to the ssm slot: the estimate keeps exactly them.

The family's terms (docs/language.md, "Saved activations") are compiled from text and bound through
a profile's `slots { ssm ... }`; the bytes one rank keeps per micro-batch, less what the layer
keeps without them, must equal the declared expressions evaluated by hand on the drawn dims, times the
compute bytes and the rank's tokens: the split ones divided by tp, the `replicate` one whole.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from hpdsl.api import compile_sources
from hpdsl.bound.bind import bind
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.context import scalar_context
from hpdsl.cost.formulas.memory import activation, column_act_coeffs, layer_act_coeffs
from hpdsl.diagnostics import Source
from hpdsl.model.strategy import Strategy
from own_ssm import own_ssm_source

def _source(saved: str, hidden: int, state: int, expand: int) -> str:
    return own_ssm_source(("colwise", "rowwise"), f"    flops scan = 2 * ssm_expand * hidden * ssm_state\n    {saved}",
                          hidden, state, expand, "  ssm_proj_bias")


def _kept(saved: str, hidden: int, state: int, expand: int, strategy: Strategy) -> list[float]:
    """Return what one rank keeps of a layer (none, selective, full recompute), less what it keeps without the terms."""
    registry = compile_sources([Source("own.hpf", _source(saved, hidden, state, expand))])
    columns = model_columns(bind(registry.models["m"], registry.profile("own"), families=registry.families))
    column = columns.layer_column("layer")
    assert column.config is not None
    run = columns.cost_model.profile.run
    x = scalar_context(strategy, run)
    with_terms = activation(column_act_coeffs(column, columns), x)
    without = activation(layer_act_coeffs(column.config, run, whole=column.whole, saved=()), x)
    return [float(w - o) for w, o in zip(with_terms, without, strict=True)]


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 9), st.integers(1, 5), st.integers(0, 9), st.integers(0, 4),
       st.sampled_from([16, 32, 48]), st.integers(1, 16), st.integers(1, 3), st.sampled_from([1, 2, 4]),
       st.sampled_from(["bf16-mixed", "fp32"]))
def test_declared_saved_terms_are_what_the_estimate_keeps(a: int, b: int, c: int, d: int, hidden: int, state: int,
                                                          expand: int, tp: int, precision: str) -> None:
    saved = (f"saved scan = {a} * ssm_expand * hidden / {b} + {c} * ssm_state\n"
             f"    saved scan = {d} * hidden replicate if ssm_proj_bias\n"
             "    saved scan = 1000 * hidden if ssm_norms")  # ssm_norms unset: left out
    strategy = Strategy(tp=tp, precision=precision, seq_len=256)
    split = Fraction(a * expand * hidden, b) + c * state
    per_token = (4 if precision == "fp32" else 2) * (split / tp + d * hidden)
    expected = float(256 * per_token)
    assert _kept(saved, hidden, state, expand, strategy) == pytest.approx([expected, expected, 0.0])
