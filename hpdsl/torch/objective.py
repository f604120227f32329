"""What `hpdsl train` optimises: next-token cross-entropy, plus DeepSeek-V3's multi-token prediction loss.

A model with D MTP layers (`mtp D`) predicts, at depth k = 1..D, the token
k + 1 places ahead from its depth k − 1 hidden state and the embedding of the
token k places ahead (hpdsl/torch/layers.py `CausalLM`, `MTPLayer`). Every
step draws a global batch of seq + 1 + D synthetic tokens per sequence from the
seed; a rank's share is its rows and its cp chunk of positions, each depth's
ids and labels the same window shifted by k, so a cp rank needs no token of
another. The loss is the main cross-entropy plus λ/D times the depths' sum,
λ = MTP_WEIGHT (DeepSeek-V3's weight for its first 10T tokens).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hpdsl.ir.nodes import ModelIR

MTP_WEIGHT = 0.3
"""λ: the weight of the MTP depths' mean cross-entropy beside the main one."""


def draw(step: int, seed: int, rows: int, seq: int, vocab: int, depth: int = 0) -> Tensor:
    """Return the step's global batch of synthetic token ids [rows, seq + 1 + depth]."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    return torch.randint(0, vocab, (rows, seq + 1 + depth), generator=generator)


def window(tokens: Tensor, rows: slice, positions: slice, depth: int) -> tuple[Tensor, Tensor]:
    """Return (ids, labels) of `rows` at `positions`: [b, s] without MTP, else [b, s, 1 + depth] (shift k at [..., k])."""
    start, stop = positions.start or 0, positions.stop
    if stop is None:
        stop = tokens.shape[1] - 1 - depth
    shifted = [tokens[rows, start + k:stop + k] for k in range(depth + 2)]
    if depth == 0:
        return shifted[0], shifted[1]
    return torch.stack(shifted[:-1], dim=-1), torch.stack(shifted[1:], dim=-1)


def objective(logits: Tensor, labels: Tensor) -> Tensor:
    """Return the loss of logits [b, (1 + D)·s, vocab] (main, then each depth) for labels [b, s] or [b, s, 1 + D].

    Logits split over the vocabulary (a DTensor under tp) need torch's
    loss_parallel() around this call and the backward.
    """
    if labels.ndim == 2:
        return F.cross_entropy(logits.flatten(0, 1), labels.reshape(-1))
    seq, depth = labels.shape[1], labels.shape[2] - 1
    losses = [F.cross_entropy(logits[:, k * seq:(k + 1) * seq].flatten(0, 1), labels[..., k].reshape(-1))
              for k in range(depth + 1)]
    extra = losses[1]
    for loss in losses[2:]:
        extra = extra + loss
    return losses[0] + extra * (MTP_WEIGHT / depth)


def mtp_depth(model: ModelIR) -> int:
    """Return how many MTP layers the model has (what `objective` and the batch's extra tokens follow)."""
    return sum(g.count for g in model.groups if g.mtp)


def batch(step: int, seed: int, rows: int, seq: int, vocab: int, depth: int = 0) -> tuple[Tensor, Tensor]:
    """Return the step's whole batch: ids and labels ([rows, seq], or [rows, seq, 1 + depth] with MTP layers)."""
    return window(draw(step, seed, rows, seq, vocab, depth), slice(None), slice(0, seq), depth)


def rank_batch(step: int, seed: int, rows: int, seq: int, vocab: int, depth: int,
          part: tuple[slice, slice]) -> tuple[Tensor, Tensor]:
    """Return this rank's ids and labels: its rows of the step's batch and its cp chunk of positions."""
    return window(draw(step, seed, rows, seq, vocab, depth), part[0], part[1], depth)


__all__ = ["MTP_WEIGHT", "batch", "draw", "mtp_depth", "objective", "rank_batch", "window"]
