"""A layer's wiring into its norms and slots (hpdsl/bound/wiring.py, hpdsl/bound/slots.py).

The one answer of norm_paths is what the slots, the norm-count check and the built layer
read; these tests hold its table (docs/language.md#block-wiring) and its invariants.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpdsl.api import compile_sources
from hpdsl.bound import wiring
from hpdsl.bound.shape import layer_problems
from hpdsl.bound.slots import layer_slots
from hpdsl.cost import bind, parameters
from hpdsl.diagnostics import Source
from hpdsl.errors import SpecError
from hpdsl.ir.nodes import KindIR, LayerGroup, ModelIR, ProfileIR
from hpdsl.model.fields import FIELDS, WIRINGS


def _ops(norms: int, ffn: int = 3, attention: int = 4) -> dict[str, int]:
    return {"attMM": attention, "attBMM": 2, "ffMM": ffn, "softmax": 1, "dropout": 0, "normOp": norms,
            "gather": 4, "headCast": 1, "ffAct": 1, "linrec": 0}


def _model(wiring_name: str, norms: int) -> tuple[ModelIR, ProfileIR]:
    profile = ProfileIR("p", {"decoder": KindIR("decoder", _ops(norms))}, default="decoder",
                        slots={"norm": "norm", "attention": "attention", "mlp": "mlp"})
    model = ModelIR("m", "p", hidden=64, layers=2, heads=4, vocab=96, ffn_width=128, wiring=wiring_name,
                    groups=(LayerGroup("decoder", 2),))
    return model, profile


def test_the_norms_of_each_wiring() -> None:
    one_of_each = {w: [path for _, path in wiring.norm_paths(w, 1, True)] for w in WIRINGS}
    assert one_of_each == {
        "pre_norm": ["mixer_norm", "ffn_norm"],
        "sandwich": ["mixer_norm", "mixer_post_norm", "ffn_norm", "ffn_post_norm"],
        "sublayer_post_norm": ["mixer_post_norm", "ffn_post_norm"],
        "post_norm": ["mixer_post_norm", "ffn_post_norm"],
        "parallel": ["mixer_norm"],
        "parallel_two_norms": ["mixer_norm", "ffn_norm"],
        "gated": ["mixer_norm", "ffn_norm"],
    }
    assert FIELDS["wiring"].choices == WIRINGS and FIELDS["wiring"].default == "pre_norm"


def test_slots_place_each_norm_beside_its_block() -> None:
    orders = {}
    for name, norms in (("pre_norm", 2), ("sublayer_post_norm", 2), ("parallel", 1), ("sandwich", 4)):
        cost = bind(*_model(name, norms))
        orders[name] = [slot.path for slot in layer_slots(cost.base, cost.profile.slots)]
    assert orders == {
        "pre_norm": ["mixer_norm", "mixer", "ffn_norm", "ffn"],
        "sublayer_post_norm": ["mixer", "mixer_post_norm", "ffn", "ffn_post_norm"],
        "parallel": ["mixer_norm", "mixer", "ffn"],
        "sandwich": ["mixer_norm", "mixer", "mixer_post_norm", "ffn_norm", "ffn", "ffn_post_norm"],
    }


def test_a_parallel_layer_prices_one_norm() -> None:
    parallel = parameters(bind(*_model("parallel", 1))).total
    pre_norm = parameters(bind(*_model("pre_norm", 2))).total
    assert pre_norm - parallel == 2 * 64  # one norm of 64 weights fewer in each of the two layers


@given(st.sampled_from(WIRINGS), st.integers(0, 2), st.booleans(), st.integers(0, 8))
def test_wiring_for_count_names_exactly_the_wirings_holding_that_count(
        name: str, attentions: int, ffn: bool, count: int) -> None:
    fits = wiring.wiring_for_count(count, attentions, ffn)
    holds = len(wiring.norm_paths(name, attentions, ffn)) == count
    usable = name not in wiring.PARALLEL or wiring.parallel_fits(attentions, ffn)
    assert (name in fits) == (holds and usable)


@given(st.sampled_from(WIRINGS), st.integers(0, 2), st.booleans())
def test_every_block_has_a_norm_and_every_norm_a_block(name: str, attentions: int, ffn: bool) -> None:
    held = wiring.blocks(attentions, ffn)
    paths = wiring.norm_paths(name, attentions, ffn)
    assert {block for block, _ in paths} <= set(held)
    if name not in wiring.PARALLEL:  # a sequential wiring normalises every block
        assert {block for block, _ in paths} == set(held)
    assert len(set(paths)) == len(paths)


WIRED = """
profile wired {
  default full
  kind full {
    wiring sublayer_post_norm
    ops { attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }
  }
  kind windowed from full { attention sliding }
  kind side_by_side from full {
    wiring parallel
    ops { normOp 1 }
  }
}
model mixed : wired {
  hidden 64  layers 3  heads 4  vocab 96  ffn_width 128  sliding_window 8  stack [full, windowed, side_by_side]
}
"""


def test_a_kind_states_its_wiring_and_a_kind_from_it_inherits_it() -> None:
    registry = compile_sources([Source("wired.hpf", WIRED)])
    assert {n: k.wiring for n, k in registry.profile("wired").kinds.items()} == \
        {"full": "sublayer_post_norm", "windowed": "sublayer_post_norm", "side_by_side": "parallel"}
    cost = bind(registry.models["mixed"], registry.profile("wired"))
    assert [cost.kind_config(kind).wiring for kind in cost.distinct_kinds()] == \
        ["sublayer_post_norm", "sublayer_post_norm", "parallel"]
    stated = compile_sources([Source("wired.hpf", WIRED.replace("sliding_window 8", "sliding_window 8  "
                                                                "wiring sandwich  layer_norms 4"))])
    cost = bind(stated.models["mixed"], stated.profile("wired"))
    assert {cost.kind_config(kind).wiring for kind in cost.distinct_kinds()} == {"sandwich"}  # the model's wins


def test_one_norm_on_a_sequential_layer_hints_the_parallel_wiring() -> None:
    """GPT-J/Phi's one norm, on an unwired kind: the hint names `wiring parallel`, not a second norm alone."""
    model, profile = _model("pre_norm", 1)
    problems = layer_problems(bind(attrs.evolve(model, wiring=None), profile))
    assert [p.code for p in problems] == ["norm-count-mismatch"]
    assert "`wiring parallel`" in problems[0].hint and "such a layer has 2" in problems[0].message
    wired = attrs.evolve(profile, kinds={"decoder": attrs.evolve(profile.kinds["decoder"], wiring="parallel")})
    assert layer_problems(bind(attrs.evolve(model, wiring=None), wired)) == ()


# --------------------------------------------------------------------------
# Gated blocks and cross-attention layers (Mllama; profiles/mllama.hpf)
# --------------------------------------------------------------------------

CROSSED = """
profile crossed {
  default full
  kind full {
    ops { attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }
  }
  kind cross from full {
    attention cross
    wiring gated
  }
}
model m : crossed {
  hidden 64  layers 3  heads 4  kv_heads 2  vocab 96  ffn_width 128  cross_qk_norm  stack [full, cross, full]
}
"""


def test_a_gated_layer_puts_a_gate_after_each_block() -> None:
    cost = bind(*_model("gated", 2))
    assert [slot.path for slot in layer_slots(cost.base, {**cost.profile.slots, "gate": "tanh_gate"})] == \
        ["mixer_norm", "mixer", "mixer_gate", "ffn_norm", "ffn", "ffn_gate"]
    assert parameters(cost).total - parameters(bind(*_model("pre_norm", 2))).total == 2 * 2  # two scalars a layer
    assert all(wiring.gate_paths(w, 1, True) == () for w in WIRINGS if w != "gated")


def test_a_cross_kind_holds_a_cross_attention_in_place_of_its_mixer() -> None:
    registry = compile_sources([Source("crossed.hpf", CROSSED)])
    cost = bind(registry.models["m"], registry.profile("crossed"), families=registry.families)
    slots = layer_slots(cost.kind_config("cross"), registry.profile("crossed").kinds["cross"].slots)
    assert [(slot.role, slot.path) for slot in slots] == [
        ("norm", "cross_norm"), ("cross_attention", "cross_attention"), ("gate", "cross_gate"),
        ("norm", "ffn_norm"), ("mlp", "ffn"), ("gate", "ffn_gate")]
    crossing = slots[1].config
    assert (crossing.causal, crossing.qk_norm, crossing.q_norm_width) == (False, True, 16)
    per_kind = parameters(cost).per_kind
    # the same projections; two per-head norms of head_dim 16 and two gates more
    assert per_kind["cross"].total - per_kind["full"].total == 2 * 16 + 2
    assert layer_problems(cost) == ()


def test_a_cross_kind_with_two_attentions_is_refused() -> None:
    text = CROSSED.replace("attention cross\n", "attention cross\n    ops { attMM 8 }\n")
    with pytest.raises(SpecError) as refused:
        compile_sources([Source("crossed.hpf", text)])
    crossing = [d for d in refused.value.diagnostics if d.code == "layer-attentions"]
    assert crossing and "attention cross" in crossing[0].message and "attMM 4" in (crossing[0].hint or "")
