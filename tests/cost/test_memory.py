"""Memory per device: pipeline layout, in-flight micro-batches, ZeRO, experts, recompute."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from cost_builders import LLAMA_OPS, dense_model, example, hybrid_model, moe_model

from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.facts.params import parameters
from hpdsl.cost.formulas.context import context
from hpdsl.cost.formulas.memory import activation, layer_act_coeffs, layer_activation_bytes
from hpdsl.cost.price.pipeline_layout import build_layout, even_split, in_flight
from hpdsl.model.strategy import Strategy


def test_even_split_gives_extras_to_the_middle_first() -> None:
    assert even_split(8, 4) == (2, 2, 2, 2)
    assert even_split(61, 8) == (7, 8, 8, 8, 8, 8, 7, 7)
    assert even_split(7, 4) == (1, 2, 2, 2)
    assert even_split(6, 4) == (1, 2, 2, 1)
    assert even_split(3, 1) == (3,)


def test_layout_places_embedding_first_and_output_and_mtp_last() -> None:
    layout = build_layout([(0, 2), (1, 3)], [(2, 1)], 5, 3, 4, stages=2, vpp=2)
    assert layout.chunk_layers.tolist() == [1, 2, 1, 1]
    assert layout.comp[0].tolist() == [1, 0, 0, 1, 0]
    assert layout.comp[-1].tolist() == [0, 1, 1, 0, 1]
    assert layout.rank_comp.tolist() == [[1, 1, 0, 1, 0], [1, 2, 1, 0, 1]]
    assert layout.rank_layers().tolist() == [2, 3]
    assert layout.first_layers(np.array([[0], [1], [1], [1]]))[:, 0].tolist() == [
        [0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0]]  # chunk 1 opens with a column-0 layer


def test_in_flight_1f1b_and_interleaved() -> None:
    assert in_flight(4, 1, np.array([8]))[:, 0].tolist() == [4, 3, 2, 1]
    assert in_flight(4, 1, np.array([2]))[:, 0].tolist() == [2, 2, 2, 1]
    p, v = 4, 2
    weights = in_flight(p, v, np.array([16]))[:, 0]
    # Megatron: the first rank holds (1 + (p-1)/(p·v)) times p micro-batches of its layers.
    first_rank = weights[0] + weights[p]
    assert first_rank / v == pytest.approx(p * (1 + (p - 1) / (p * v)))


def test_one_device_holds_every_parameter_byte() -> None:
    cost_model = dense_model()
    total = parameters(cost_model).total
    stage = estimate(cost_model, Strategy()).memory.per_stage[0]
    # bf16-mixed Adam (hpdsl/cost/facts/precision.py): bf16 weights, fp32 gradients, fp32 master + two moments.
    assert stage.params_bytes == 2 * total
    assert stage.grads_bytes == 4 * total
    assert stage.optimizer_bytes == (4 + 2 * 4) * total


@pytest.mark.parametrize(("zero", "sharded"), [("none", ()), ("os", ("optimizer",)),
                                               ("os+grad", ("optimizer", "grads")),
                                               ("os+grad+params", ("optimizer", "grads", "params"))])
def test_zero_shards_over_data_parallel_ranks(zero: str, sharded: tuple[str, ...]) -> None:
    cost_model = dense_model()
    one = estimate(cost_model, Strategy(dp=1, global_batch=8, zero=zero)).memory.per_stage[0]
    eight = estimate(cost_model, Strategy(dp=8, global_batch=8, zero=zero)).memory.per_stage[0]
    for part in ("params", "grads", "optimizer"):
        ratio = getattr(one, f"{part}_bytes") / getattr(eight, f"{part}_bytes")
        assert ratio == pytest.approx(8 if part in sharded else 1)
    assert (eight.transient_bytes > 0) == ("params" in sharded)  # ZeRO-3 gathers one layer


def test_experts_shard_over_ep_and_etp() -> None:
    cost_model = moe_model()
    layer = cost_model.kinds["moe"]
    assert layer.fields["experts"] == 8
    base = estimate(cost_model, Strategy(dp=4)).memory.per_stage[0].params_bytes
    ep = estimate(cost_model, Strategy(dp=4, ep=4)).memory.per_stage[0].params_bytes
    etp = estimate(cost_model, Strategy(dp=4, etp=4)).memory.per_stage[0].params_bytes
    routed = parameters(cost_model).per_kind["moe"].routed
    moe_layers = 3 + 1  # three body layers and the MTP layer
    assert base - ep == pytest.approx(2 * routed * moe_layers * (1 - 1 / 4))
    assert ep == pytest.approx(etp)


def test_the_last_stage_holds_a_tied_embedding_copy() -> None:
    tied = dense_model(tie=True)
    embedding = parameters(tied).embedding
    assert parameters(tied).output == 0
    last = estimate(tied, Strategy(pp=2)).memory.per_stage[-1].params_bytes
    untied_last = estimate(dense_model(tie=False), Strategy(pp=2)).memory.per_stage[-1].params_bytes
    assert last == pytest.approx(untied_last)  # the copy costs what an untied head costs
    single = estimate(tied, Strategy()).memory.per_stage[0].params_bytes
    assert single == 2 * parameters(tied).total  # no copy without pipeline parallelism
    assert embedding > 0


def test_mtp_lives_on_the_last_stage_with_an_embedding_copy() -> None:
    cost_model = moe_model(mtp=1)
    stages = estimate(cost_model, Strategy(pp=2, dp=1)).memory.per_stage
    assert "mtp:moe" in stages[-1].columns and "mtp:moe" not in stages[0].columns
    assert stages[0].columns == {"dense": 1, "moe": 1, "embedding": 1}


def _first_stage_activations(cost_model, **kw) -> float:
    return estimate(cost_model, Strategy(pp=2, global_batch=4, **kw)).memory.per_stage[0].activation_bytes


def test_recompute_orders_activation_memory() -> None:
    cost_model = dense_model(layers=8)
    none, selective, full = (_first_stage_activations(cost_model, recompute=rc)
                             for rc in ("none", "selective", "full"))
    first = {n: _first_stage_activations(cost_model, recompute="full", recompute_layers=n)
             for n in (1, 2, 4)}
    assert none > full
    assert none > selective > full  # flash attention: selective drops only the row statistics
    assert none > first[1] > first[2] > first[4] == full


def test_full_recompute_adds_one_layer_being_recomputed() -> None:
    cost_model = dense_model()
    stage = estimate(cost_model, Strategy(recompute="full")).memory.per_stage[0]
    x = context(StrategyGrid.from_strategies([Strategy()]), cost_model.profile.run)
    one_layer = activation(layer_act_coeffs(cost_model.kind_config(None), cost_model.profile.run), x)[0]
    assert stage.transient_bytes == float(one_layer[0])


def test_flash_attention_saves_no_scores() -> None:
    cost_model = dense_model()
    flash = estimate(cost_model, Strategy(seq_len=2048)).memory.peak_bytes
    naive = estimate(cost_model, Strategy(seq_len=2048, flash_attention=False)).memory.peak_bytes
    assert naive - flash > 4 * 8 * 2048 * 2048  # a·s² bytes per layer at least


def test_peak_is_the_largest_stage_total() -> None:
    result = estimate(example("deepseek_v3"), Strategy(tp=8, pp=8, dp=2, ep=8, sequence_parallel=True,
                                                       global_batch=64))
    totals = [s.total_bytes for s in result.memory.per_stage]
    assert result.memory.peak_bytes == max(totals)
    assert result.memory.peak_stage == totals.index(max(totals))
    for s in result.memory.per_stage:
        parts = s.params_bytes + s.grads_bytes + s.optimizer_bytes + s.activation_bytes + s.transient_bytes
        assert s.total_bytes == pytest.approx(parts, rel=1e-12)
    assert sum(s.layers for s in result.memory.per_stage) == 61


def test_linear_attention_layers_save_less_than_full_ones_without_flash() -> None:
    cost_model = hybrid_model()
    run = cost_model.profile.run
    x = context(StrategyGrid.from_strategies([Strategy(seq_len=4096, flash_attention=False)]), run)
    lin = activation(layer_act_coeffs(cost_model.kind_config("lin"), run), x)[0][0]
    full = activation(layer_act_coeffs(cost_model.kind_config("full"), run), x)[0][0]
    assert lin < full
    assert LLAMA_OPS["linrec"] == 0 and cost_model.kind_config("lin").ops["linrec"] == 1


def test_the_score_tensor_is_copied_only_by_a_cast_or_dropout() -> None:
    """Without flash, A·V reads the softmax output itself unless a cast or the attention dropout copies it."""
    cost_model = dense_model()
    cfg, a, s, b = cost_model.kind_config(None), 8, 1024, 1
    same = Strategy(seq_len=s, flash_attention=False, compute_bytes=2, softmax_bytes=2)
    cast = same.with_(softmax_bytes=4)
    run = cost_model.profile.run
    no_dropout = layer_activation_bytes(cfg, run, same)[0]
    with_cast = layer_activation_bytes(cfg, run, cast)[0]
    with_dropout = layer_activation_bytes(cfg, attrs.evolve(run, dropout_bytes=1), same)[0]
    scores = b * s * a * s  # score elements of one layer
    assert with_cast - no_dropout == scores * (4 - 2 + 2)   # fp32 softmax output and its bf16 copy
    assert with_dropout - no_dropout == scores * (1 + 2)    # the dropout mask and the dropped-out copy


def test_moe_combine_keeps_the_expert_outputs_and_the_gated_shared_output() -> None:
    """k expert outputs per token for the routing weights' gradient; h more under a shared-expert gate."""
    cost_model = moe_model(top_k=2, mtp=0)
    cfg = cost_model.kind_config("moe")
    gated = attrs.evolve(cfg, shared_gate=True)
    run, strategy = cost_model.profile.run, Strategy(seq_len=128, compute_bytes=2)
    k2 = layer_activation_bytes(cfg, run, strategy)[0]
    k4 = layer_activation_bytes(attrs.evolve(cfg, top_k=4), run, strategy)[0]
    h, w, tokens = 256, 128, 128
    per_routed_token = h + 3 * w + h  # its input row, gate·up and down inputs, its output
    assert k4 - k2 == pytest.approx(tokens * 2 * 2 * (per_routed_token + 1), rel=1e-12)  # + a top-k weight
    assert layer_activation_bytes(gated, run, strategy)[0] - k2 == tokens * 2 * h


def test_a_moe_beside_its_mlp_keeps_its_three_branch_norms_inputs() -> None:
    """Gemma 4's MoE block beside the MLP normalises three more tensors (mlp_post_norm, moe_norm, moe_post_norm).

    Each keeps its input at the norm's width, beside the norms the op vector counts: 3 · norm_bytes · h per
    token more than the same layer priced without them (the dense MLP's own terms are compute-width ones).
    """
    cost_model = moe_model(top_k=2, mtp=0)
    cfg = attrs.evolve(cost_model.kind_config("moe"), beside_width=96)
    run = cost_model.profile.run
    plain, beside = layer_act_coeffs(attrs.evolve(cfg, beside_width=0), run), layer_act_coeffs(cfg, run)
    assert beside.sp_b - plain.sp_b == 3 * run.norm_bytes * cfg.hidden
