"""The estimator prices tp from the family layouts: replicated slots are held whole on every tp rank."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import attrs
import pytest
from cost_builders import EXAMPLES, dense_model

from hpdsl.api import bind_model
from hpdsl.bound.bind import CostModel
from hpdsl.bound.slots import kind_bindings, layer_slots
from hpdsl.cost import bind
from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.params import parameters
from hpdsl.cost.facts.replication import replicated_numel
from hpdsl.cost.feasibility.reasons import strategy_reasons
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.flops import MIXER_TERMS, layer_flop_terms
from hpdsl.cost.price.prepare import prepare
from hpdsl.ir.nodes import evolve
from hpdsl.model.strategy import Strategy


@cache
def with_families(name: str) -> CostModel:
    """Return an example bound with the registry's families, as `hpdsl estimate` binds it."""
    return bind_model([EXAMPLES / f"{name}.hpf"])


@cache
def without_families(name: str) -> CostModel:
    """Return the same model bound without families (everything non-expert tp-sharded)."""
    return attrs.evolve(with_families(name), families={})


def _stage(cost_model: CostModel, strategy: Strategy) -> tuple[float, float]:
    """Return (params bytes, activation bytes) of the only pipeline stage."""
    (stage,) = estimate(cost_model, strategy).memory.per_stage
    return stage.params_bytes, stage.activation_bytes


def test_qwen3_next_linear_attention_is_whole_on_every_tp_rank() -> None:
    cost_model = with_families("qwen3_next_80b_a3b")
    h, n_k, d_k, n_v, d_v, conv = 2048, 16, 128, 32, 128, 4  # examples/qwen3_next_80b_a3b.hpf
    qkv = 2 * n_k * d_k + n_v * d_v
    # in_proj_qkvz, in_proj_ba, conv1d, dt_bias, A_log, norm, out_proj (HF Qwen3NextGatedDeltaNet)
    gdn = (qkv + n_v * d_v) * h + 2 * n_v * h + qkv * conv + 2 * n_v + d_v + h * n_v * d_v
    assert parameters(cost_model).per_kind["linear_attention"].attention == gdn
    mixer = layer_slots(cost_model.kind_config("linear_attention"), kind_bindings(cost_model, "linear_attention"))[1]
    assert mixer.role == "linear_attention"
    assert replicated_numel(cost_model.families["gated_delta_net"], mixer) == (0, gdn)
    linear_layers = cost_model.layer_kinds().count("linear_attention")
    assert linear_layers == 36
    strategy = Strategy(tp=2, ep=2, global_batch=1)
    params, acts = _stage(cost_model, strategy)
    bare_params, bare_acts = _stage(without_families("qwen3_next_80b_a3b"), strategy)
    # tp=2 used to halve each linear layer's mixer; now every rank holds it whole.
    assert params - bare_params == linear_layers * gdn / 2 * 2  # bf16 weights
    assert acts > bare_acts


def test_deepseek_v3_mla_is_split_by_heads_as_without_families() -> None:
    cost_model = with_families("deepseek_v3")
    prepared = prepare(cost_model)
    assert all("mla" not in column.whole for column in prepared.columns.columns)
    mixer = layer_slots(cost_model.kind_config("moe"), kind_bindings(cost_model, "moe"))[1]
    sharded, replicated = replicated_numel(cost_model.families["mla"], mixer)
    # q_a_proj, kv_a_proj_with_mqa and their norms whole; q_b_proj, kv_b_proj, o_proj by heads (no q_proj).
    h, q_c, kv_c, heads, nope, rope, v = 7168, 1536, 512, 128, 128, 64, 128  # examples/deepseek_v3.hpf
    # o_proj.bias and the latent down-projections' biases (attention_bias) count, as entries
    assert replicated == q_c * h + q_c + (kv_c + rope) * h + kv_c + h + q_c + (kv_c + rope)
    assert sharded == heads * (nope + rope) * (q_c + h) + heads * (nope + v) * kv_c + h * heads * v
    strategy = Strategy(tp=8, ep=8, dp=1, global_batch=8, sequence_parallel=True)
    assert prepared.params == prepare(without_families("deepseek_v3")).params
    ours, bare = estimate(cost_model, strategy), estimate(without_families("deepseek_v3"), strategy)
    assert ours.memory.peak_bytes == bare.memory.peak_bytes
    assert ours.flops.per_device == bare.flops.per_device
    assert strategy_reasons(attrs.evolve(strategy, tp=256, ep=4), cost_model) == (
        "tp 256 does not divide the 128 attention heads", "tp 256 does not divide the 128 kv heads")


def test_dense_gqa_models_price_alike_with_or_without_families() -> None:
    strategy = Strategy(tp=4, pp=2, dp=2, global_batch=16, sequence_parallel=True)
    for name in ("llama2_7b", "llama3_8b"):
        ours = estimate(with_families(name), strategy)
        bare = estimate(without_families(name), strategy)
        assert prepare(with_families(name)).params == prepare(without_families(name)).params
        assert ours.memory.peak_bytes == bare.memory.peak_bytes
        assert ours.step_time_s == bare.step_time_s


def test_at_tp_1_families_change_nothing() -> None:
    strategy = Strategy(ep=8, dp=8, global_batch=8)
    for name in ("qwen3_next_80b_a3b", "deepseek_v3"):
        ours = estimate(with_families(name), strategy)
        bare = estimate(without_families(name), strategy)
        assert ours.memory.peak_bytes == bare.memory.peak_bytes


def test_qwen3_next_linear_attention_runs_whole_on_every_tp_rank() -> None:
    cost_model = with_families("qwen3_next_80b_a3b")
    strategy = Strategy(tp=2, ep=2, global_batch=1)  # MoE at tp 2: sequence parallel on
    ours = estimate(cost_model, strategy).flops
    bare = estimate(without_families("qwen3_next_80b_a3b"), strategy).flops
    assert ours.total == bare.total  # model FLOPs: the layout does not change them
    column = model_columns(cost_model).layer_column("linear_attention")
    terms = layer_flop_terms(column.config, column.matmuls)
    mixer = sum(terms[name].per_token(strategy.seq_len) for name in MIXER_TERMS)
    assert mixer == 67371008 + 5767168 + 65536 + 131072 / 3  # attMM, linrec, conv, linrecSolve
    # 36 linear-attention layers, forward + backward (3×), 4096 tokens: each tp rank now
    # runs the other half of the mixer too.
    assert ours.per_device - bare.per_device == 16201153511424.0
    assert 36 * 3 * 4096 * mixer / 2 == pytest.approx(16201153511424.0, rel=1e-12)


def test_a_whole_mixer_needs_no_tp_reduction_only_its_sequence_parallel_input() -> None:
    cost_model = with_families("qwen3_next_80b_a3b")
    prepared = prepare(cost_model)
    h = cost_model.model.hidden
    for column, comm in zip(prepared.columns.columns, prepared.comm):
        if column.name == "linear_attention":
            assert (comm.tp, comm.tp_sp, comm.whole) == (2 * h, h, True)  # the MoE block's two
        elif column.name == "full_attention":
            assert (comm.tp, comm.tp_sp, comm.whole) == (4 * h, 0.0, False)
    bare = prepare(without_families("qwen3_next_80b_a3b"))
    assert all(c.tp_sp == 0.0 and not c.whole for c in bare.comm)
    strategy = Strategy(tp=2, ep=2, global_batch=1)
    (ours,) = estimate(cost_model, strategy).memory.per_stage
    (theirs,) = estimate(without_families("qwen3_next_80b_a3b"), strategy).memory.per_stage
    # Per layer and pass one h-wide reduce-scatter fewer: 2 passes · 2 bytes · 2048 tokens · h · (t−1);
    # but under sp each whole mixer's fp32 gradients (33,718,464 parameters) are all-reduced over tp
    # once per step: 2·(t−1)/t · 4 bytes each.
    gdn_grads = 36 * 33_718_464 * 4
    assert theirs.communication["tp"] - ours.communication["tp"] == 36 * 2 * 2 * 2048 * h - gdn_grads
    assert 36 * 2 * 2 * 2048 * h == 603979776


def test_tp_need_not_divide_a_replicated_mixers_heads(tmp_path: Path) -> None:
    source = (EXAMPLES / "qwen3_next_80b_a3b.hpf").read_text()
    for old, new in (("kv_heads 2 ", "kv_heads 4 "), ("key_heads 16 ", "key_heads 6 "),
                     ("value_heads 32 ", "value_heads 18 ")):
        assert old in source
        source = source.replace(old, new)
    path = tmp_path / "odd_heads.hpf"
    path.write_text(source)
    cost_model = bind_model([path])
    strategy = Strategy(tp=4, ep=4, global_batch=1, sequence_parallel=True)
    assert strategy_reasons(strategy, cost_model) == ()  # 16 attention heads, 4 kv heads
    assert strategy_reasons(strategy, attrs.evolve(cost_model, families={})) == (
        "tp 4 does not divide the 6 linear-attention key heads",
        "tp 4 does not divide the 18 linear-attention value heads")


def test_row_parallel_biases_are_held_whole_by_every_tp_rank() -> None:
    """o_proj.bias and down_proj.bias are `replicate` in the layouts: h each per layer on every tp rank."""
    plain = dense_model()
    with_bias = bind(evolve(plain.model, o_bias=True, mlp_bias=True), plain.profile)
    layers, h = 4, with_bias.model.hidden
    for tp in (1, 2):
        biased = estimate(with_bias, Strategy(tp=tp)).memory.per_stage[0].params_bytes
        bare = estimate(plain, Strategy(tp=tp)).memory.per_stage[0].params_bytes
        split = parameters(with_bias).total - parameters(plain).total - 2 * layers * h
        assert biased - bare == 2 * (split / tp + 2 * layers * h)  # bf16 weights


def test_sequence_parallelism_all_reduces_replicated_gradients_over_tp() -> None:
    cost_model = dense_model()
    on = estimate(cost_model, Strategy(tp=2, sequence_parallel=True, global_batch=1))
    off = estimate(cost_model, Strategy(tp=2, sequence_parallel=False, global_batch=1))
    # Two norms per layer and the final norm, fp32 gradients, a ring all-reduce over 2 ranks.
    # All-gather plus reduce-scatter moves what one all-reduce does: the rest is the gradients.
    norms = (2 * 4 + 1) * cost_model.model.hidden
    assert on.communication["tp"] - off.communication["tp"] == 2 * (2 - 1) / 2 * 4 * norms
    assert on.strategy.sequence_parallel is True and off.strategy.sequence_parallel is False
