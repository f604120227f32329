"""This machine's attention kernel: the share of peak SDPA's score work reaches, by size (the `attention` curve).

The time model prices a layer's score work (QKᵀ, A·V, the softmax and its cast, forward,
backward and the flash backward's recompute) at the device's attention curve where it
declares one, else at its matmul curve (hpdsl/cost/formulas/device_time.py). A CPU's flash
kernel computes the same FLOPs far slower than a matmul of their shape (its exponentials
and its backward's recomputation run in scalar loops), so calibrate measures it: causal SDPA
at each sequence of SEQUENCES, HEADS heads of HEAD_DIM, forward and backward, fp32.

The work is counted by the attention family's own terms (families/attention.hpf; `score_work`):
per query, head and attended key 4·d + 16/3 FLOPs forward (QKᵀ and A·V, the softmax's 13/3,
the cast's 1), the backward twice that, and the flash backward's recompute 2·d + 16/3;
a causal flash kernel attends to s/2 keys per query on average
(hpdsl/cost/formulas/flops.py `executed_keys`). The curve's size is (s · s/2 · d)^(1/3),
what the time model reads it at.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hpdsl.torch.calibrate_links import WINDOW_S, sustained_seconds, together

SEQUENCES = (64, 128, 256, 512, 1024)
"""The sequence lengths measured (one sequence each)."""

HEADS = 4
HEAD_DIM = 64


def score_work(seq: int, heads: int = HEADS, head_dim: int = HEAD_DIM) -> float:
    """Return the score FLOPs the time model prices for one causal flash attention's forward and backward.

    Per key, the standard attention family's own `flops` terms (families/attention.hpf) on a config of
    these heads: forward, its backward twice that, and again what `recompute selective` marks (the flash
    backward's recompute).
    """
    from hpdsl.bound.config import ModuleConfig
    from hpdsl.bound.slots import Slot
    from hpdsl.cost.facts.cost_terms import slot_terms
    from hpdsl.cost.facts.params import standard_registry

    families, bindings = standard_registry()
    config = ModuleConfig(hidden=heads * head_dim, heads=heads, kv_heads=heads, head_dim=head_dim)
    terms = slot_terms(Slot("attention", "mixer", config, bindings["attention"]), families)
    forward = sum(float(term.ts) for term in terms)
    again = sum(float(term.ts) for term in terms if term.selective)
    return seq * (seq / 2) * (3 * forward + again)


def size(seq: int, head_dim: int = HEAD_DIM) -> float:
    """Return the size the time model reads the attention curve at: (tokens · keys · head_dim)^(1/3)."""
    return float((seq * seq / 2 * head_dim) ** (1 / 3))


def measure_attention(window: float = WINDOW_S) -> tuple[tuple[float, float], ...]:
    """Return (size, FLOP/s of the priced score work) of causal SDPA's forward and backward at each of SEQUENCES."""
    points = []
    for seq in SEQUENCES:
        q, k, v = (torch.randn(1, HEADS, seq, HEAD_DIM, requires_grad=True) for _ in range(3))
        grad = torch.randn(1, HEADS, seq, HEAD_DIM)

        def run() -> None:
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)

        together()
        seconds = sustained_seconds(run, window / len(SEQUENCES), least=1)
        points.append((size(seq), score_work(seq) / seconds))
    return tuple(points)


__all__ = ["HEADS", "HEAD_DIM", "SEQUENCES", "measure_attention", "score_work", "size"]
