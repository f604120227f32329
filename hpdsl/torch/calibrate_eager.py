"""This machine's eager PyTorch costs: host seconds per aten call, and bytes/s of elementwise kernels.

The time model prices a column by the calls and elements its families' `eager` terms
declare (hpdsl/cost/facts/eager.py); these are the two prices, each calls and elements
counted as the families' are (hpdsl/torch/eager_count.py):

- call_overhead: a tiny layer of the standard library (PROBE_MODEL: a Llama layer of hidden
  16, 8 tokens), forward and backward, its time over its aten calls. Its arithmetic is
  negligible; what is left is what every call of the reference modules costs on the host:
  dispatch, autograd's bookkeeping, the modules' Python around each call.
- eager_bandwidth: an elementwise probe written as a layer's elementwise work is (an RMSNorm, a
  SiLU-gated product, a rotation's cosine, chained STAGES times, through autograd) at LARGE, its
  time beyond its own calls' host time (the probe at TINY, per call), over the bytes its calls move.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from hpdsl.torch.calibrate_links import WINDOW_S, sustained_seconds, together
from hpdsl.torch.eager_count import EagerCount

PROBE_MODEL = """model eager_probe : llama2 {
  hidden 16
  layers 1
  heads 2
  kv_heads 1
  vocab 64
  ffn_width 48
}
"""
"""The standard library's Llama layer at a size where its arithmetic is negligible."""

PROBE_TOKENS = 8

STAGES = 3
"""Copies of the elementwise block the probe chains (one backward start shared by all, as a layer's)."""

TINY = (8, 16)
"""The probe's shape for a call's host time."""

LARGE = (256, 768)
"""The probe's shape for the bandwidth: a layer's feed-forward width of tokens (768 KiB fp32 tensors)."""


def probe(rows: int, cols: int) -> Callable[[], None]:
    """Return one forward and backward of the probe at [rows, cols] fp32."""
    torch.manual_seed(0)
    x = torch.randn(rows, cols, requires_grad=True)
    gate = torch.randn(rows, cols, requires_grad=True)
    weight = torch.randn(cols, requires_grad=True)
    grad = torch.randn(rows, cols)

    def run() -> None:
        h = x
        for _ in range(STAGES):
            normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
            h = torch.nn.functional.silu(normed) * gate + torch.cos(h) * normed
        h.backward(grad)

    return run


def counted(run: Callable[[], None]) -> tuple[int, int]:
    """Return the aten calls one run of `run` dispatches and the elements they move."""
    run()  # the first run allocates the gradients; count a steady one
    with EagerCount() as count:
        run()
    return count.total_calls, count.total_moved


def layer_probe() -> Callable[[], None]:
    """Return one forward and backward of PROBE_MODEL's layer, built from the standard library, on PROBE_TOKENS."""
    from hpdsl.api import compile_sources
    from hpdsl.diagnostics.span import Source
    from hpdsl.torch.model import build_model

    registry = compile_sources([Source("<calibrate>", PROBE_MODEL)])
    model = build_model(registry.model("eager_probe"), registry=registry, device="cpu", dtype=torch.float32)
    layer = model.get_submodule("layers.0")
    x = torch.randn(1, PROBE_TOKENS, 16, requires_grad=True)
    grad, positions = torch.randn(1, PROBE_TOKENS, 16), torch.arange(PROBE_TOKENS)
    return lambda: layer(x, positions=positions).backward(grad)


def per_call(run: Callable[[], None], window: float) -> float:
    """Return `run`'s sustained seconds over its aten calls."""
    calls, _ = counted(run)
    together()
    return sustained_seconds(run, window) / calls


def measure_call_overhead(window: float = WINDOW_S) -> float:
    """Return host seconds per aten call of the reference modules: the tiny layer's time over its calls."""
    return per_call(layer_probe(), window)


def measure_eager_bandwidth(window: float = WINDOW_S) -> float:
    """Return the bytes/s the large probe's calls move (fp32) beyond their host time (the tiny probe's, per call)."""
    host = per_call(probe(*TINY), window / 2)
    run = probe(*LARGE)
    calls, moved = counted(run)
    together()
    seconds = sustained_seconds(run, window / 2, least=1)
    return 4.0 * moved / max(seconds - calls * host, seconds * 0.1)


__all__ = ["LARGE", "PROBE_MODEL", "STAGES", "TINY", "layer_probe", "measure_call_overhead", "measure_eager_bandwidth",
           "probe"]
