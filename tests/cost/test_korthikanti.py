"""Korthikanti et al. (2022), "Reducing Activation Recomputation in Large Transformer Models":
the per-layer activation formulas come out exactly for a GPT-style spec.

The spec: plain GeLU MLP of width 4h (ffMM 2), two LayerNorms, dropout after the
attention scores and after both blocks, 2-byte activations and softmax output,
1-byte dropout masks, no flash attention. Per layer (bytes, one micro-batch):
no parallelism 34·s·b·h + 5·a·s²·b; tensor parallel (10 + 24/t)·s·b·h + 5·a·s²·b/t;
with sequence parallel 34·s·b·h/t + 5·a·s²·b/t; selective recompute drops 5·a·s²·b/t.
"""

from __future__ import annotations

import pytest
from cost_builders import GPT_OPS, dense_model

from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.formulas.context import context
from hpdsl.cost.formulas.memory import activation, layer_act_coeffs
from hpdsl.ir.nodes import RunFacts
from hpdsl.model.strategy import Strategy

GPT_RUN = RunFacts(norm_bytes=2, dropout_bytes=1)
H, A, S, B, L = 1024, 16, 2048, 2, 8


def _gpt():
    return dense_model(hidden=H, heads=A, layers=L, ffn_width=4 * H, vocab=51200, ops=GPT_OPS,
                       run=GPT_RUN)


def _layer(strategy: Strategy) -> tuple[float, float, float]:
    cost_model = _gpt()
    x = context(StrategyGrid.from_strategies([strategy]), GPT_RUN)
    none, selective, full = activation(layer_act_coeffs(cost_model.kind_config(None), GPT_RUN), x)
    return float(none[0]), float(selective[0]), float(full[0])


def _strategy(t: int, sp: bool, **kw) -> Strategy:
    return Strategy(tp=t, sequence_parallel=sp, micro_batch=B, seq_len=S, flash_attention=False,
                    compute_bytes=2, softmax_bytes=2, **kw)


def test_no_parallelism_is_34sbh_plus_5as2b() -> None:
    assert _layer(_strategy(1, False))[0] == 34 * S * B * H + 5 * A * S * S * B


@pytest.mark.parametrize("t", [2, 4, 8])
def test_tensor_parallel(t: int) -> None:
    assert _layer(_strategy(t, False))[0] == (10 + 24 / t) * S * B * H + 5 * A * S * S * B / t


@pytest.mark.parametrize("t", [2, 4, 8])
def test_tensor_and_sequence_parallel(t: int) -> None:
    assert _layer(_strategy(t, True))[0] == 34 * S * B * H / t + 5 * A * S * S * B / t


@pytest.mark.parametrize("t", [1, 2, 8])
def test_selective_recompute_with_sequence_parallel(t: int) -> None:
    assert _layer(_strategy(t, True))[1] == 34 * S * B * H / t


def test_selective_recompute_tensor_parallel_only() -> None:
    assert _layer(_strategy(4, False))[1] == (10 + 24 / 4) * S * B * H


@pytest.mark.parametrize(("t", "sp"), [(1, False), (4, True)])
def test_full_recompute_keeps_the_layer_input(t: int, sp: bool) -> None:
    assert _layer(_strategy(t, sp))[2] == 2 * S * B * H / (t if sp else 1)


def test_first_stage_holds_pp_micro_batches_of_its_layers() -> None:
    """1F1B: the first of p stages holds p micro-batches of L/p layers, i.e. L layers' worth."""
    per_layer = _layer(_strategy(4, True))[0]
    embedding_mask = S * B * H / 4  # the embedding dropout's 1-byte mask, sequence-parallel
    ids = 8 * S * B  # the int64 token ids (the labels on the last stage), whole on every tp rank
    result = estimate(_gpt(), _strategy(4, True, pp=4, global_batch=16 * B))
    first = result.memory.per_stage[0]
    assert first.activation_bytes == L * per_layer + 4 * (embedding_mask + ids)
    last = result.memory.per_stage[-1]
    # One micro-batch in flight; the output layer keeps the final norm's and the projection's
    # inputs (2 bytes each, sequence-parallel), fp32 logits, vocab-parallel (4·s·b·v/t), and the labels.
    output = 4 * S * B * H / 4 + 4 * S * B * 51200 / 4 + ids
    assert last.activation_bytes == L / 4 * per_layer + output
