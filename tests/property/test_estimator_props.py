"""Invariants of the estimator (docs/reference.md#flops-are-linear-in-the-op-counts and the
estimator issue's properties).

- lowering any op count never raises FLOPs or memory;
- the difference between two stacks is exactly the missing ops' terms;
- memory per device never grows when tp, cp, ep or dp grows with the rest fixed
  (pp, vpp and etp are the documented exceptions: 1F1B keeps pp micro-batches in
  flight on the first stage, interleaving adds in-flight chunks, and expert TP
  replicates the routed tokens' inputs over its ranks; docs/cost-model.md);
- total FLOPs do not depend on the parallel layout;
- pricing a grid and pricing each strategy alone agree exactly.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import assume, given
from hypothesis import strategies as st

from blocks import linear, mla, moe
from hpdsl.bound.bind import CostModel
from hpdsl.bound.slots import buildable, layer_shape
from hpdsl.cost import bind
from hpdsl.cost.estimate import Estimate, estimate
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.feasibility.reasons import validate_strategy
from hpdsl.cost.formulas.flops import HEAD_CAST, SOFTMAX
from hpdsl.cost.price.grid import price_grid
from hpdsl.ir.nodes import KindIR, LayerGroup, ModelIR, ProfileIR, RunFacts
from hpdsl.model.strategy import RECOMPUTE, Strategy, ZERO

OPS = ("attMM", "attBMM", "ffMM", "softmax", "dropout", "normOp", "gather", "headCast", "ffAct",
       "linrec")
SCORE_OPS = ("attBMM", "softmax", "headCast")
BATCH = 8


@attrs.frozen
class Spec:
    """What a generated model is made of, so a test can rebuild it with one thing changed."""

    ops: dict[str, int]
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    hybrid: bool
    moe: dict[str, Any] | None
    mtp: int
    run: RunFacts

    def build(self, ops: dict[str, int] | None = None, lin_ops: dict[str, int] | None = None,
              pattern: tuple[str, ...] | None = None, score_less: bool = False) -> CostModel:
        """Return the bound model (optionally with other op vectors or another stack)."""
        ops = ops or self.ops
        second = lin_ops or dict(ops, attBMM=0, softmax=0, headCast=0, linrec=0 if score_less else 1)
        kinds = {"full": KindIR("full", ops)}
        if self.hybrid or pattern:
            kinds["lin"] = KindIR("lin", second, "full" if score_less else "linear")
        pattern = pattern or tuple("lin" if self.hybrid and i % 2 == 0 else "full"
                                   for i in range(self.layers))
        groups = [LayerGroup(k, 1) for k in pattern]
        groups += [LayerGroup(pattern[-1], self.mtp, True)] if self.mtp else []
        model = ModelIR("m", "p", hidden=self.hidden, layers=len(pattern), heads=self.heads,
                        vocab=512, kv_heads=self.kv_heads, head_dim=self.head_dim, ffn_width=4 * self.hidden,
                        mtp=self.mtp, **(self.moe or {}), **linear(4, 16, 8, 16, 4),
                        groups=tuple(groups))
        return bind(model, ProfileIR("p", kinds, default="full", run=self.run))


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    heads = draw(st.sampled_from([4, 8]))
    moe_block = st.builds(moe, experts=st.sampled_from([4, 8]), top_k=st.integers(1, 2),
                          expert_width=st.sampled_from([32, 64]), shared_experts=st.integers(0, 1),
                          shared_width=st.just(32))
    moe_fields = draw(st.none() | moe_block)
    run = RunFacts(dropout_bytes=draw(st.sampled_from([0, 1])), norm_bytes=draw(st.sampled_from([2, 4])),
                   shard_activations=draw(st.booleans()))
    return Spec(ops={op: draw(st.integers(0, 4)) for op in OPS}, hidden=draw(st.sampled_from([64, 128])),
                heads=heads, kv_heads=draw(st.sampled_from([heads, 4])),
                head_dim=draw(st.sampled_from([16, 32])), layers=draw(st.integers(2, 6)),
                hybrid=draw(st.booleans()), moe=moe_fields, mtp=draw(st.integers(0, 1)), run=run)


@st.composite
def strategies(draw: st.DrawFn, cost_model: CostModel, *, first_n: bool = True) -> Strategy:
    """Draw a strategy the model accepts (the choices are built to pass its checks)."""
    model = cost_model.model
    tp, cp, pp = (draw(st.sampled_from(v)) for v in ([1, 2, 4], [1, 2], [1, 2]))
    dp = draw(st.sampled_from([1, 2]))
    mesh = dp * cp * tp
    experts = model.experts or 1
    ep = draw(st.sampled_from([e for e in (1, 2, 4) if experts % e == 0 and mesh % e == 0]))
    etp = draw(st.sampled_from([1, 2] if model.experts and (mesh // ep) % 2 == 0 else [1]))
    a2a_ok = model.heads % (tp * cp) == 0
    strategy = Strategy(
        tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, etp=etp,
        vpp=draw(st.sampled_from([1, 2] if pp == 2 and model.layers >= 4 else [1])),
        cp_kind=draw(st.sampled_from(["ring", "a2a"] if a2a_ok else ["ring"])),
        sequence_parallel=True if model.experts and tp > 1 else draw(st.sampled_from([None, True, False])),
        micro_batch=draw(st.sampled_from([1, 2])), global_batch=BATCH,
        seq_len=draw(st.sampled_from([64, 128])), recompute=draw(st.sampled_from(RECOMPUTE)),
        recompute_layers=draw(st.sampled_from([None, None, 1])) if first_n else None,
        zero=draw(st.sampled_from(ZERO)), flash_attention=draw(st.booleans()),
        device=draw(st.sampled_from(["h100", "mi300x"])))
    assume(not validate_strategy(strategy, cost_model))
    return strategy


def _builds(cost_model: CostModel) -> set[str | None]:
    """Return the kinds whose op vector makes a layer the backend builds."""
    return {k for k in cost_model.distinct_kinds()
            if buildable(*layer_shape(cost_model.kind_config(k if k in cost_model.kinds else None)))}


def _stage_totals(result: Estimate) -> list[float]:
    return [s.total_bytes for s in result.memory.per_stage]


@given(specs(), st.data())
def test_lowering_an_op_count_never_raises_flops_or_memory(spec: Spec, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["full", "lin"] if spec.hybrid else ["full"]))
    op = data.draw(st.sampled_from([o for o in OPS if spec.ops[o] > 0] or ["attMM"]))
    assume(spec.ops[op] > 0)
    lin = dict(spec.ops, attBMM=0, softmax=0, headCast=0, linrec=1)
    higher = spec.build(lin_ops=lin)
    strategy = data.draw(strategies(higher))
    if kind == "full":
        lower = spec.build(ops=dict(spec.ops, **{op: spec.ops[op] - 1}), lin_ops=lin)
    else:
        assume(lin[op] > 0)
        lower = spec.build(lin_ops=dict(lin, **{op: lin[op] - 1}))
    # Parameters are the built slots' layouts: an op vector no layer holds (ffMM 4) prices no module,
    # so lowering it to one a layer holds (ffMM 3) adds the modules built.
    assume(_builds(lower) <= _builds(higher))
    before, after = estimate(higher, strategy), estimate(lower, strategy)
    tolerance = 1 + 1e-12
    for part in ("forward", "backward", "recompute", "per_device"):
        assert getattr(after.flops, part) <= getattr(before.flops, part) * tolerance, part
    assert after.memory.peak_bytes <= before.memory.peak_bytes * tolerance
    for a, b in zip(_stage_totals(after), _stage_totals(before)):
        assert a <= b * tolerance


@given(specs(), st.data())
def test_score_less_layers_remove_exactly_their_score_terms(spec: Spec, data: st.DataObject) -> None:
    n = spec.layers
    k = data.draw(st.integers(1, n - 1))
    seq = data.draw(st.sampled_from([64, 256]))
    # A full-attention kind counts no delta-rule updates (the checker holds linrec to `attention linear`).
    # Its layers build one attention (attMM 4, a feed-forward of 0, 2 or 3 matrices): the score terms are
    # the attention family's cost terms (families/attention.hpf), run as the op vector counts them.
    ffn = spec.ops["ffMM"] if spec.ops["ffMM"] in (0, 2, 3) else 3
    spec = attrs.evolve(spec, moe=None, hybrid=False, mtp=0, ops=dict(spec.ops, linrec=0, attMM=4, ffMM=ffn))
    full = spec.build(pattern=("full",) * n)
    mixed = spec.build(pattern=("lin",) * k + ("full",) * (n - k), score_less=True)
    # Without flash every score is executed: the full square, as per_layer counts it.
    strategy = Strategy(global_batch=BATCH, seq_len=seq, flash_attention=False)
    a, d_h = spec.heads, spec.head_dim
    per_layer = BATCH * seq * seq * a * (spec.ops["attBMM"] * 2 * d_h + spec.ops["softmax"] * SOFTMAX
                                         + spec.ops["headCast"] * HEAD_CAST)
    diff = estimate(full, strategy).flops.forward - estimate(mixed, strategy).flops.forward
    assert abs(diff - k * per_layer) <= 1e-9 * max(1.0, k * per_layer, estimate(full, strategy).flops.forward)


@given(specs(), st.data(), st.sampled_from(["tp", "cp", "ep", "dp"]))
def test_memory_never_grows_with_a_sharding_degree(spec: Spec, data: st.DataObject, degree: str) -> None:
    cost_model = spec.build()
    strategy = data.draw(strategies(cost_model))
    bigger = strategy.with_(**{degree: 2 * getattr(strategy, degree)})
    assume(not validate_strategy(bigger, cost_model))
    assert estimate(cost_model, bigger).memory.peak_bytes <= \
        estimate(cost_model, strategy).memory.peak_bytes * (1 + 1e-12)


@given(specs(), st.data())
def test_total_flops_do_not_depend_on_the_layout(spec: Spec, data: st.DataObject) -> None:
    cost_model = spec.build()
    one = data.draw(strategies(cost_model, first_n=False))
    # The kernel (flash skips causally masked scores) is not the layout: hold it too.
    two = data.draw(strategies(cost_model, first_n=False)).with_(recompute=one.recompute,
                                                                  seq_len=one.seq_len,
                                                                  flash_attention=one.flash_attention)
    a, b = estimate(cost_model, one).flops, estimate(cost_model, two).flops
    assert (a.forward, a.backward, a.recompute) == (b.forward, b.backward, b.recompute)


@given(specs(), st.data())
def test_grid_and_scalar_pricing_agree(spec: Spec, data: st.DataObject) -> None:
    cost_model = spec.build()
    chosen = data.draw(st.lists(strategies(cost_model), min_size=1, max_size=6))
    price = price_grid(cost_model, StrategyGrid.from_strategies(chosen))
    for i, strategy in enumerate(chosen):
        alone = estimate(cost_model, strategy)
        assert alone.memory.peak_bytes == price.peak_bytes[i]
        assert alone.memory.peak_stage == price.peak_stage[i]
        assert alone.step_time_s == price.step_time_s[i]
        assert (alone.flops.forward, alone.flops.recompute) == \
            (price.flops_forward[i], price.flops_recompute[i])
