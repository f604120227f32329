"""FLOPs per step from the op counts: matmul closed forms, the stack-difference gold, corrections."""

from __future__ import annotations

import pytest
from cost_builders import LLAMA_OPS, dense_model, example, hybrid_model, moe_model

from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.flops import FF_ACT, HEAD_CAST, NORM, SOFTMAX, layer_flop_terms
from hpdsl.model.strategy import Strategy

MATMULS_ONLY = dict(attMM=4, attBMM=2, ffMM=2, softmax=0, dropout=0, normOp=0, gather=4, headCast=0,
                    ffAct=0, linrec=0)
G, S = 8, 512


def _forward(cost_model, **kw) -> float:
    # Without flash the whole score square is executed: the closed forms below count it.
    return estimate(cost_model, Strategy(global_batch=G, seq_len=S, flash_attention=False, **kw)).flops.forward


def test_narayanan_closed_form_with_full_recompute() -> None:
    """Narayanan et al. (2021): F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) with recompute."""
    h, L, V = 256, 4, 1000
    cost_model = dense_model(hidden=h, layers=L, vocab=V, ffn_width=4 * h, ops=MATMULS_ONLY)
    final_norm = 3 * G * S * NORM * h   # elementwise, outside the closed form
    flops = estimate(cost_model, Strategy(global_batch=G, seq_len=S, recompute="full",
                                          flash_attention=False)).flops
    assert flops.total - final_norm == pytest.approx(
        96 * G * S * L * h * h * (1 + S / (6 * h) + V / (16 * L * h)), rel=1e-12)
    no_recompute = estimate(cost_model, Strategy(global_batch=G, seq_len=S, flash_attention=False)).flops
    assert no_recompute.recompute == 0
    assert no_recompute.total - final_norm == pytest.approx(
        72 * G * S * L * h * h * (1 + S / (6 * h) + V / (12 * L * h)), rel=1e-12)


def test_replacing_two_full_layers_with_score_less_ones_removes_exactly_their_score_ops() -> None:
    full = hybrid_model(pattern=("full",) * 4)
    mixed = hybrid_model(pattern=("lin", "full", "lin", "full"), score_less=True)
    a, d_h = 8, 64
    t_att_bmm = G * S * S * a * (d_h + d_h)      # one unit: QKᵀ or A·V, 2 FLOPs per multiply-add
    t_softmax = G * S * S * a * SOFTMAX
    t_head_cast = G * S * S * a * HEAD_CAST
    gold = 2 * (2 * t_att_bmm + t_softmax + t_head_cast)
    assert _forward(full) - _forward(mixed) == pytest.approx(gold, rel=1e-12)


def test_the_activation_function_scales_with_the_sequence() -> None:
    """Upstream's ffAct term had no s factor: 21·b·h_ff. Here it is per token."""
    with_act = dense_model(ops=LLAMA_OPS)
    without = dense_model(ops=dict(LLAMA_OPS, ffAct=0))
    diff = _forward(with_act) - _forward(without)
    assert diff == pytest.approx(G * S * 4 * FF_ACT * 1024, rel=1e-12)


def test_the_output_layer_costs_two_flops_per_weight_and_token() -> None:
    """Upstream scaled the output layer by 1/16 (and by the parameter bytes)."""
    small, big = dense_model(vocab=1000), dense_model(vocab=3000)
    assert _forward(big) - _forward(small) == pytest.approx(G * S * 2 * 256 * 2000, rel=1e-12)


def test_linear_attention_recurrence_is_priced() -> None:
    """The chunked delta rule (chunks of 64): state products, intra-chunk products, inverses, conv."""
    cost_model = hybrid_model()
    cfg = cost_model.kind_config("lin")
    n_v, d_k, d_v, chunk = 8, 32, 32, 64
    delta_rule = n_v * (6 * d_k * d_v + chunk * (6 * d_k + 4 * d_v))
    # families/gated_delta_net.hpf declares the delta rule and the inverses; its layout's conv1d the taps.
    terms = layer_flop_terms(cfg, model_columns(cost_model).layer_column("lin").matmuls)
    assert terms["linrec"].t == pytest.approx(delta_rule, rel=1e-12)
    assert terms["linrecSolve"].t == pytest.approx(n_v * chunk ** 2 / 3, rel=1e-12)
    assert terms["conv"].t == pytest.approx(2 * 4 * (2 * 4 * 32 + 8 * 32), rel=1e-12)
    without = hybrid_model(pattern=("full",) * 8)
    assert _forward(cost_model) < _forward(without)  # six linear layers run no s² scores


def test_moe_layers_run_top_k_experts_and_the_router() -> None:
    two, four = moe_model(top_k=2, mtp=0), moe_model(top_k=4, mtp=0)
    expert = 3 * 2 * 256 * 128 + FF_ACT * 128   # gated MLP of width 128 per routed token
    assert _forward(four) - _forward(two) == pytest.approx(G * S * 3 * 2 * expert, rel=1e-12)


@pytest.mark.parametrize("strategy", [
    Strategy(), Strategy(tp=2, sequence_parallel=True), Strategy(pp=2), Strategy(dp=4),
    Strategy(cp=2), Strategy(tp=2, dp=2, pp=2, micro_batch=2, ep=4, sequence_parallel=True),
])
def test_total_flops_do_not_depend_on_the_layout(strategy: Strategy) -> None:
    cost_model = moe_model()
    reference = estimate(cost_model, Strategy(global_batch=G, seq_len=S)).flops
    flops = estimate(cost_model, strategy.with_(global_batch=G, seq_len=S)).flops
    assert (flops.forward, flops.backward, flops.recompute) == \
        (reference.forward, reference.backward, reference.recompute)


def test_device_flops_split_evenly_without_pipeline_or_replication() -> None:
    cost_model = dense_model()
    flops = estimate(cost_model, Strategy(tp=2, dp=2, cp=2, sequence_parallel=True,
                                          global_batch=G, seq_len=S)).flops
    assert flops.per_device * 8 == pytest.approx(flops.total, rel=1e-12)


def test_selective_recompute_runs_the_scores_again() -> None:
    cost_model = dense_model()
    flops = estimate(cost_model, Strategy(global_batch=G, seq_len=S, recompute="selective",
                                          flash_attention=False)).flops
    a, d_h, layers = 8, 32, 4
    per_layer = G * S * S * a * (2 * d_h + SOFTMAX + HEAD_CAST)  # QKᵀ, softmax, score cast
    assert flops.recompute == pytest.approx(layers * per_layer, rel=1e-12)


def test_deepseek_v3_is_about_six_active_parameters_per_token() -> None:
    result = estimate(example("deepseek_v3"), Strategy(tp=8, pp=8, dp=2, ep=8, sequence_parallel=True,
                                                       global_batch=64, seq_len=4096))
    tokens = 64 * 4096
    per_token = (result.flops.forward + result.flops.backward) / tokens
    active = result.params.active
    assert 6 * active < per_token < 6 * active * 1.6  # attention and the MTP head on top
