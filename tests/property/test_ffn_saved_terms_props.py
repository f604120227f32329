"""An author's feed-forward family with random `saved` terms bound to the mlp slot: the estimate keeps exactly them.

The family (an RWKV-style channel mix, docs/language.md "Saved activations") is compiled from text and bound
through a profile's `slots { mlp ... }`; the bytes one rank keeps per micro-batch, less what the layer keeps
with the feed-forward's terms left out, must equal the declared expressions evaluated by hand on the drawn
dims, times the compute bytes and the rank's tokens: split as the width (divided by tp), by sequence (divided
by tp under sequence parallelism), whole (`replicate`); `ffAct` counted as the kind's ffAct op count.
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

SPLITS = {"": "t", "sequence": "sp", "replicate": "whole"}


def _source(saved: str, hidden: int, width: int, acts: int) -> str:
    return f'''
family channel_mix {{
  factory "acme.rwkv:ChannelMix"
  variant plain "acme.rwkv:ChannelMix" default params(key, value)
  layout {{
    key.weight   (ffn_width, hidden) colwise
    value.weight (hidden, ffn_width) rowwise
  }}
  cost {{
{saved}
  }}
}}
profile own {{
  kind layer {{
    ffn dense
    slots {{ mlp channel_mix }}
    ops {{ attMM 4  attBMM 2  ffMM 2  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct {acts}  linrec 0 }}
  }}
}}
model m : own {{
  hidden {hidden}  layers 2  heads 4  vocab 64  ffn_width {width}
  stack [layer * 2]
}}
'''


def _kept(saved: str, hidden: int, width: int, acts: int, strategy: Strategy) -> list[float]:
    """Return what one rank keeps of a layer (none, selective, full recompute), less what it keeps without the terms."""
    registry = compile_sources([Source("own.hpf", _source(saved, hidden, width, acts))])
    columns = model_columns(bind(registry.models["m"], registry.profile("own"), families=registry.families))
    column = columns.layer_column("layer")
    assert column.config is not None and {t.role for t in column.ffn_saved} <= {"mlp"}
    run = columns.cost_model.profile.run
    x = scalar_context(strategy, run)
    with_terms = activation(column_act_coeffs(column, columns), x)
    without = activation(layer_act_coeffs(column.config, run, whole=column.whole, saved=column.saved,
                                          ffn_saved=()), x)
    return [float(w - o) for w, o in zip(with_terms, without, strict=True)]


terms = st.lists(st.tuples(st.sampled_from(["ffn", "ffAct"]), st.integers(0, 5), st.integers(1, 3),
                           st.sampled_from(["hidden", "ffn_width"]), st.sampled_from(list(SPLITS))),
                 min_size=1, max_size=4)


@settings(max_examples=12, deadline=None)
@given(terms, st.sampled_from([16, 32, 48]), st.sampled_from([32, 64]), st.integers(0, 2),
       st.sampled_from([1, 2, 4]), st.booleans(), st.sampled_from(["bf16-mixed", "fp32"]))
def test_declared_feed_forward_terms_are_what_the_estimate_keeps(
        drawn: list[tuple[str, int, int, str, str]], hidden: int, width: int, acts: int, tp: int, sp: bool,
        precision: str) -> None:
    lines = [f"    saved {name} = {a} * {dim} / {b} {split}".rstrip() for name, a, b, dim, split in drawn]
    lines.append("    saved ffn = 1000 * hidden if mlp_bias")  # mlp_bias unset: left out
    strategy = Strategy(tp=tp, precision=precision, seq_len=256, sequence_parallel=sp and tp > 1)
    dims = {"hidden": hidden, "ffn_width": width}
    per_token = Fraction(0)
    for name, a, b, dim, split in drawn:
        elements = Fraction(a * dims[dim], b) * (acts if name == "ffAct" else 1)
        divisor = 1 if SPLITS[split] == "whole" or (SPLITS[split] == "sp" and not strategy.sequence_parallel) else tp
        per_token += elements / divisor
    expected = float(256 * (4 if precision == "fp32" else 2) * per_token)
    assert _kept("\n".join(lines), hidden, width, acts, strategy) == pytest.approx([expected, expected, 0.0])
