"""The run facts `hpdsl train` sets for hpdsl's torch backend (hpdsl/cost/facts/backend.py), and how the estimator reads them."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from cost_builders import example, moe_model

from hpdsl.bound.bind import CostModel
from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.backend import backend_facts
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.formulas.memory import layer_activation_bytes
from hpdsl.cost.price.grid import price_grid
from hpdsl.ir.nodes import RunFacts, evolve
from hpdsl.model.strategy import Strategy

TP_SP = Strategy(dp=2, tp=2, sequence_parallel=True, zero="os+grad+params", precision="fp32", seq_len=32)


def _with_run(cost_model: CostModel, run: RunFacts) -> CostModel:
    return attrs.evolve(cost_model, profile=attrs.evolve(cost_model.profile, run=run))


def test_backend_facts_follow_the_strategy() -> None:
    run = RunFacts()
    assert backend_facts(run, TP_SP).routed_tokens_split
    assert not backend_facts(run, TP_SP.with_(zero="none", dp=1)).routed_tokens_split
    assert backend_facts(run, TP_SP.with_(pp=2, dp=1, global_batch=2)).deferred_grad_accumulation
    assert not backend_facts(run, TP_SP).deferred_grad_accumulation


def test_what_the_backend_keeps_per_precision_prices_16_bytes_a_parameter_at_bf16_mixed() -> None:
    from hpdsl.cost.facts.backend import KEPT, backend_strategy

    mixed = Strategy(precision="bf16-mixed", zero="os+grad+params", dp=2, seq_len=32)
    assert set(KEPT) == {"fp32", "bf16-mixed"}
    assert backend_facts(RunFacts(), mixed).main_param_bytes == 0
    assert backend_strategy(mixed).param_bytes == 4
    assert backend_facts(RunFacts(), mixed).cpu_attention and not backend_facts(RunFacts(), mixed, "cuda").cpu_attention
    cost_model = example("llama3_8b")
    megatron = estimate(cost_model, mixed)
    backend = estimate(_with_run(cost_model, backend_facts(cost_model.profile.run, mixed)), backend_strategy(mixed))
    params = megatron.memory.per_stage[0].params_bytes / 2  # bf16 weights, ZeRO-3 over dp 2: the shard's count
    # Megatron's recipe: 2 + 4 + 4 + 8 = 18 bytes a parameter; FSDP2's: the fp32 shard is weight and master, 16.
    def static(priced: object) -> float:
        stage = priced.memory.per_stage[0]  # type: ignore[attr-defined]
        return float(stage.params_bytes + stage.grads_bytes + stage.optimizer_bytes)

    assert static(megatron) == pytest.approx(18 * params)
    assert static(backend) == pytest.approx(16 * params)
    assert backend_strategy(Strategy(precision="fp8-mixed")).param_bytes is None  # not the backend's: unchanged


def _mixtral_layer_bytes(run: RunFacts, strategy: Strategy) -> float:
    from hpdsl.cost.facts.columns import model_columns

    columns = model_columns(example("mixtral_8x7b"))
    cfg = columns.configs[0]
    return layer_activation_bytes(cfg, run, strategy)[0]


def test_a_gathered_tp_input_is_kept_whole_on_every_tp_rank() -> None:
    # Mixtral's layer: the attention's input (h) gathered before q/k/v; the MoE routes its chunk.
    plain = _mixtral_layer_bytes(RunFacts(), TP_SP)
    gathered = _mixtral_layer_bytes(evolve(RunFacts(), gathered_tp_input=True), TP_SP)
    hidden, tokens = 4096, 32
    assert gathered - plain == pytest.approx(hidden * tokens * 4 * (1 - 1 / 2))
    # Without sequence parallelism every tp rank holds the whole input already: nothing moves.
    no_sp = TP_SP.with_(sequence_parallel=False)
    assert _mixtral_layer_bytes(evolve(RunFacts(), gathered_tp_input=True), no_sp) == _mixtral_layer_bytes(
        RunFacts(), no_sp)


def test_a_moe_that_gathers_routes_every_token_on_every_tp_rank() -> None:
    # Mixtral: top_k 2 of 8 experts of width 14336, gated (ffMM 3): 3 widths and the input per routed token.
    split = _mixtral_layer_bytes(RunFacts(), TP_SP)
    whole = _mixtral_layer_bytes(evolve(RunFacts(), routed_tokens_split=False), TP_SP)
    hidden, width, experts, k, tokens = 4096, 14336, 8, 2, 32
    router_and_combine = hidden + 2 * experts + k + k * hidden
    routed = k * 3 * width + k * hidden
    assert whole - split == pytest.approx(tokens * 4 * (router_and_combine + routed) / 2)


def test_cp_gathered_keys_values_and_mask() -> None:
    cp = Strategy(dp=2, cp=2, precision="fp32", seq_len=32, zero="os+grad+params")
    ring = _mixtral_layer_bytes(RunFacts(), cp)
    gathered = _mixtral_layer_bytes(evolve(RunFacts(), cp_gathered_kv=True), cp)
    kv_width, tokens, seq = 2 * 8 * 128, 16, 32  # k and v: 8 kv heads of 128
    assert gathered - ring == pytest.approx(tokens * 4 * (kv_width + seq))
    assert _mixtral_layer_bytes(evolve(RunFacts(), cp_gathered_kv=True), cp.with_(cp=1, dp=4)) == (
        _mixtral_layer_bytes(RunFacts(), cp.with_(cp=1, dp=4)))


def test_cpu_attention_prices_the_math_kernel_for_mla_only() -> None:
    from hpdsl.cost.facts.columns import model_columns

    strategy = Strategy(tp=2, precision="fp32", seq_len=32)
    for name, math in (("deepseek_v3", True), ("mixtral_8x7b", False)):
        cfg = model_columns(example(name)).configs[-1]
        flash = layer_activation_bytes(cfg, RunFacts(), strategy)[0]
        cpu = layer_activation_bytes(cfg, evolve(RunFacts(), cpu_attention=True), strategy)[0]
        heads, tokens, seq = cfg.heads, 32, 32
        # The fp32 softmax (4·a·s per token) in place of flash's row statistics (4·a), over tp.
        assert cpu - flash == (pytest.approx(tokens * heads * (seq * 4 - 4) / 2) if math else 0.0)


def test_gradients_without_grad_accumulation_follow_upstreams_rule() -> None:
    cost_model = moe_model()
    off = _with_run(cost_model, evolve(cost_model.profile.run, grad_accumulation=False))
    one = Strategy(dp=2, global_batch=2)
    assert estimate(off, one).memory.per_stage[0].grads_bytes == 0
    assert estimate(cost_model, one).memory.per_stage[0].grads_bytes > 0  # the default holds them
    for held in (Strategy(dp=2, global_batch=4), Strategy(dp=1, pp=2, global_batch=2)):
        assert [s.grads_bytes for s in estimate(off, held).memory.per_stage] == [
            s.grads_bytes for s in estimate(cost_model, held).memory.per_stage]


def test_deferred_accumulation_holds_the_unsharded_gradients_and_reduces_once() -> None:
    cost_model = moe_model()
    deferred = _with_run(cost_model, evolve(cost_model.profile.run, deferred_grad_accumulation=True))
    strategy = Strategy(dp=4, zero="os+grad", global_batch=16, precision="fp32")
    now, later = estimate(cost_model, strategy), estimate(deferred, strategy)
    stage, held = now.memory.per_stage[0], later.memory.per_stage[0]
    # fp32 gradients as wide as the (unsharded under os+grad) parameters: the rank's whole, beyond its quarter.
    assert stage.grads_bytes == stage.params_bytes / 4
    assert held.transient_bytes - stage.transient_bytes == pytest.approx(stage.params_bytes - stage.grads_bytes)
    assert held.grads_bytes == stage.grads_bytes
    assert later.memory.per_stage[0].communication["dp"] < stage.communication["dp"]  # one reduce-scatter a step, not four
    # One micro-batch: nothing accumulates, nothing is deferred.
    single = strategy.with_(global_batch=4)
    assert estimate(deferred, single).memory.per_stage[0].transient_bytes == (
        estimate(cost_model, single).memory.per_stage[0].transient_bytes)


def test_the_grid_prices_the_backend_facts_as_one_estimate_does() -> None:
    cost_model = example("qwen3_next_80b_a3b")
    strategies = [TP_SP.with_(seq_len=4096), TP_SP.with_(seq_len=4096, zero="none", dp=1),
                  Strategy(dp=2, cp=2, seq_len=4096, zero="os+grad+params"),
                  Strategy(tp=2, pp=2, dp=2, seq_len=4096, zero="os+grad", global_batch=8)]
    for strategy in strategies:
        priced = _with_run(cost_model, backend_facts(cost_model.profile.run, strategy))
        grid = price_grid(priced, StrategyGrid.from_strategies([strategy]))
        one = estimate(priced, strategy)
        assert one.memory.peak_bytes == pytest.approx(float(grid.peak_bytes[0]), rel=1e-12)
        assert one.step_time_s == pytest.approx(float(grid.step_time_s[0]), rel=1e-12)
        assert np.isfinite(grid.step_time_s[0])


@pytest.mark.parametrize("gathered", [False, True])
def test_an_mtp_layer_keeps_its_heads_input_as_the_output_head_does(gathered: bool) -> None:
    """The MTP depth predicts through the shared head: its input is priced like the output column's, split or whole."""
    from hpdsl.cost.facts.columns import model_columns
    from hpdsl.cost.formulas.memory import column_act_coeffs

    run = evolve(RunFacts(), gathered_tp_input=gathered)
    columns = model_columns(_with_run(example("deepseek_v3"), run))
    mtp, out = (next(c for c in columns.columns if c.role == role) for role in ("mtp", "output"))
    kept, head = column_act_coeffs(mtp, columns), column_act_coeffs(out, columns)
    assert (kept.keep_c, kept.keep_sp_c) == (head.keep_c, head.keep_sp_c)
    assert (kept.keep_c, kept.keep_sp_c) == ((7168, 0) if gathered else (0, 7168))
    # Its 2h-wide projection's input: gathered from the sequence chunks before the column-parallel projection.
    layer = column_act_coeffs(next(c for c in columns.columns if c.config == mtp.config and c.role == "layer"),
                              columns)
    assert kept.whole_c - layer.whole_c == (2 * 7168 if gathered else 0)
    assert kept.sp_c - layer.sp_c == (0 if gathered else 2 * 7168)
