"""Sliding-window models held against FlopCounterMode: transformers' gpt-oss and Gemma-3, and hpdsl's own.

Each scaled config of bench/validate_hf_flops.py is imported with `hpdsl
import-hf` (the CLI, end to end), then one forward pass is counted: transformers'
eager model computes the whole s×s score square of every layer (it masks the
window after), which must equal hpdsl's matrix-product FLOPs over the square;
hpdsl's built model computes only the band of its sliding layers, which must
equal hpdsl's windowed count. docs/validation.md says what each side counts.
"""

from __future__ import annotations

import pytest
import torch

from hpdsl.torch import ModuleConfig
from hpdsl.torch.modules import Attention
from hpdsl.torch.modules.common import banded_attention

pytest.importorskip("transformers")

from validate_hf_flops import CONFIGS, measure  # noqa: E402  (bench/, put on the path by conftest)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_forward_matmul_flops_equal_flop_counter_mode(name: str) -> None:
    row = measure(name, batch=2, seq_len=64)
    assert row.hpdsl_kinds == row.layer_types  # the importer slides the layers transformers slides
    assert row.transformers == row.square      # eager transformers: the whole square, masked after
    assert row.built == row.windowed           # hpdsl's banded kernel: w keys per query
    assert row.windowed < row.square


def test_a_window_past_the_sequence_changes_nothing() -> None:
    row = measure("gpt_oss", batch=1, seq_len=16)  # window 16: the band is the causal square
    assert row.transformers == row.square == row.windowed == row.built


@pytest.mark.parametrize("sinks", [False, True])
def test_the_band_equals_the_masked_square(sinks: bool) -> None:
    torch.manual_seed(5)
    q, k, v = torch.randn(2, 11, 4, 8), torch.randn(2, 11, 2, 8), torch.randn(2, 11, 2, 8)
    logits = torch.randn(4) if sinks else None
    window = 4
    i = torch.arange(11)
    allowed = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)  # kv > q − w
    from hpdsl.torch.modules.common import attend

    reference = attend(q, k, v, allowed, backend="eager", sinks=logits)
    torch.testing.assert_close(banded_attention(q, k, v, window, sinks=logits), reference)


def test_sliding_attention_backends_agree_with_gradients() -> None:
    cfg = ModuleConfig(hidden=64, heads=4, head_dim=16, kv_heads=2, window=5)
    torch.manual_seed(6)
    sdpa, eager = Attention(cfg), Attention(cfg, backend="eager")
    eager.load_state_dict(sdpa.state_dict())
    x = torch.randn(2, 13, 64, requires_grad=True)
    y = x.detach().clone().requires_grad_(True)
    out_sdpa, out_eager = sdpa(x), eager(y)
    torch.testing.assert_close(out_sdpa, out_eager, rtol=1e-4, atol=1e-5)
    out_sdpa.square().sum().backward()
    out_eager.square().sum().backward()
    assert x.grad is not None and y.grad is not None
    torch.testing.assert_close(x.grad, y.grad, rtol=1e-4, atol=1e-5)
    changed = x.detach().clone()
    changed[:, :3] = 0  # positions 0..2 are outside the window of query 7 and later
    torch.testing.assert_close(eager(changed)[:, 7:], out_eager.detach()[:, 7:])
