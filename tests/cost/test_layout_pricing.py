"""The estimator prices tp from the family layouts: replicated slots are held whole on every tp rank."""

from __future__ import annotations

from functools import cache

import attrs
from cost_builders import EXAMPLES

from hpdsl.api import bind_model
from hpdsl.cost.bind import CostModel
from hpdsl.cost.estimate import estimate
from hpdsl.cost.params import parameters
from hpdsl.cost.pricing import prepare
from hpdsl.cost.replication import replicated_numel
from hpdsl.cost.strategy import Strategy
from hpdsl.slots import layer_slots


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
    mixer = layer_slots(cost_model.kind_config("linear_attention"), cost_model.model)[0]
    assert mixer.role == "linear_attention"
    assert replicated_numel(cost_model.families["gated_delta_net"], mixer) == (0, gdn)
    linear_layers = cost_model.layer_kinds().count("linear_attention")
    assert linear_layers == 36
    strategy = Strategy(tp=2, ep=2, global_batch=1)
    params, acts = _stage(cost_model, strategy)
    bare_params, bare_acts = _stage(without_families("qwen3_next_80b_a3b"), strategy)
    # tp=2 used to halve each linear layer's mixer; now every rank holds it whole.
    assert params - bare_params == linear_layers * gdn / 2 * strategy.param_bytes
    assert acts > bare_acts


def test_deepseek_v3_mla_is_not_divided_by_tp() -> None:
    cost_model = with_families("deepseek_v3")
    report = parameters(cost_model)
    prepared = prepare(cost_model)
    for column, split in zip(prepared.columns.columns, prepared.params):
        if column.role != "layer":
            continue
        layer = report.per_kind[column.kind]
        assert "mla" in column.whole
        assert split.tp == layer.dense_ffn + layer.shared  # only the MLPs shard over tp
        assert split.rep == layer.attention + layer.norms + layer.router
    tp1 = _stage(cost_model, Strategy(tp=1, ep=8, dp=8, global_batch=8))[0]
    tp8 = _stage(cost_model, Strategy(tp=8, ep=8, dp=1, global_batch=8, sequence_parallel=True))[0]
    bare8 = _stage(without_families("deepseek_v3"), Strategy(tp=8, ep=8, dp=1, global_batch=8, sequence_parallel=True))[0]
    assert bare8 < tp8 < tp1


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
