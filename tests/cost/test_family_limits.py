"""The estimator honours the module families' requires: it never prices a layout the backend refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from cost_builders import EXAMPLES

from hpdsl.bound.bind import CostModel

from hpdsl.api import bind_model
from hpdsl.cost.feasibility.reasons import validate_strategy
from hpdsl.cost.search import search
from hpdsl.model.strategy import Strategy

GIB = 1024**3

JAMBA = """
model tiny_jamba : jamba {
  hidden 64
  layers 2
  heads 4
  vocab 128
  ffn_width 96
  ssm { ssm_state 8  ssm_conv 4  ssm_expand 2  ssm_dt_rank 4 }
  stack [mamba_dense, attention_dense]
}
"""


def _jamba(tmp_path: Path) -> CostModel:
    (tmp_path / "jamba.hpf").write_text(JAMBA, encoding="utf-8")
    return bind_model([tmp_path / "jamba.hpf"])


def test_search_never_proposes_context_parallelism_for_the_selective_scan(tmp_path: Path) -> None:
    result = search(_jamba(tmp_path), 8, 80 * GIB, top=50, seq_len=8192)
    assert result.top and all(e.strategy.cp == 1 for e in result.top)


def test_a_refused_layout_names_the_family_and_its_message(tmp_path: Path) -> None:
    reasons = validate_strategy(Strategy(cp=2, dp=4, global_batch=16), _jamba(tmp_path))
    assert any("family 'mamba': the selective scan has no context-parallel form; use cp = 1" in r for r in reasons)


@pytest.mark.parametrize("spec", ["qwen3_next_80b_a3b", "deepseek_v3"])
def test_gated_deltanet_and_mla_take_context_parallelism(spec: str) -> None:
    """Both have a cp form (the state hand-off, the gathered keys and values): nothing refuses cp 2."""
    cost_model = bind_model([EXAMPLES / f"{spec}.hpf"])
    assert validate_strategy(Strategy(cp=2, dp=8, ep=8, global_batch=16), cost_model) == ()
    result = search(cost_model, 64, 1e15, top=200, seq_len=32768)  # every candidate fits
    assert any(e.strategy.cp > 1 for e in result.top)


def test_without_families_the_layout_is_only_checked_against_the_model(tmp_path: Path) -> None:
    from hpdsl.cost import bind

    families = _jamba(tmp_path)
    bare = bind(families.model, families.profile)
    strategy = Strategy(cp=2, dp=4, global_batch=16)
    assert not any("family" in reason for reason in validate_strategy(strategy, bare))


def test_the_gated_deltanet_hand_off_is_priced_once_per_sequence() -> None:
    """Under cp a linear layer sends its state and conv − 1 inputs on, whatever the sequence length.

    The ring's keys and values grow with the tokens, so doubling the sequence leaves
    2·cp(s) − cp(2s) = the hand-offs alone: forward and gradient, per linear layer.
    """
    from hpdsl.cost.estimate import estimate

    cost_model = bind_model([EXAMPLES / "qwen3_next_80b_a3b.hpf"])
    traffic = [estimate(cost_model, Strategy(cp=2, global_batch=1, seq_len=s, precision="fp32")).communication["cp"]
               for s in (4096, 8192)]
    model = cost_model.model
    linear = sum(g.count for g in model.groups if g.kind == "linear_attention" and not g.mtp)
    state = model.value_heads * model.key_head_dim * model.value_head_dim
    conv_inputs = 2 * model.key_heads * model.key_head_dim + model.value_heads * model.value_head_dim
    assert linear == 36
    assert 2 * traffic[0] - traffic[1] == linear * 2 * 4 * (state + (model.conv - 1) * conv_inputs)


@pytest.mark.parametrize(("cp", "seq_len", "per_rank"), [(4, 8, 2), (2, 4, 2), (8, 16, 2)])
def test_a_cp_chunk_shorter_than_the_convolution_tail_is_refused(cp: int, seq_len: int, per_rank: int) -> None:
    """Each cp rank hands its last conv − 1 inputs to the next: seq_len / cp must reach it (conv 4: 3 tokens)."""
    cost_model = bind_model([EXAMPLES / "qwen3_next_80b_a3b.hpf"])
    assert cost_model.model.conv == 4
    reason = (f"a context-parallel Gated DeltaNet hands conv - 1 = 3 tokens to the next cp rank: seq_len {seq_len} "
              f"/ cp {cp} gives {per_rank} per rank, fewer")
    assert reason in validate_strategy(Strategy(cp=cp, dp=8 // cp, ep=1, global_batch=8 // cp, seq_len=seq_len),
                                       cost_model)
    assert validate_strategy(Strategy(cp=cp, dp=8 // cp, global_batch=8 // cp, seq_len=2 * seq_len), cost_model) == ()


def test_search_offers_only_the_cp_whose_chunks_hold_the_convolution_tail() -> None:
    """On the memory/step-time frontier (where cp shows when it is allowed): cp up to seq_len / 3 only."""
    cost_model = bind_model([EXAMPLES / "qwen3_next_80b_a3b.hpf"])
    offered = [{e.strategy.cp for e in search(cost_model, 8, 1e15, top=200, seq_len=s, global_batch=8,
                                              pareto=True).top} for s in (8, 16, 32)]
    assert offered == [{1, 2}, {1, 2, 4}, {1, 2, 4, 8}]  # 2 tokens a rank at seq 8 · cp 4 and seq 16 · cp 8
