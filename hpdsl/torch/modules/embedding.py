"""Reference modules for the `embedding`, `output_head` and projection families: the model's two ends.

The embedding maps each token to a row of `embed_width` (hidden unless the model
states another; times √hidden under Gemma's embed_scale); the head projects
embed_width-wide states onto the vocabulary, with a bias only where the model
states head_bias. Where embed_width ≠ hidden, `InputProjection` lifts the rows to
hidden and `OutputProjection` lowers the last hidden states back (OPT-350m;
families/projection.hpf); `MTPProjection` is an MTP layer's 2·hidden → hidden
eh_proj. They subclass torch's Embedding and Linear, so their parameters are
torch's (`weight`) and whatever initialises those initialises these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from hpdsl.torch.config import ModuleConfig


def embed_width(config: ModuleConfig) -> int:
    """Return the token table's width: the config's embed_width, else hidden (a config built without binding)."""
    return int(getattr(config, "embed_width", 0) or config.hidden)


def _vocab(config: ModuleConfig) -> int:
    vocab = int(getattr(config, "vocab", 0))
    if vocab < 1:
        raise ValueError(f"the vocabulary ends need a positive vocab in the config, found {vocab}")
    return vocab


class Embedding(nn.Embedding):
    """The token embedding: one row of `hidden` per token of the config's vocab and its embed_extra_rows
    (Mllama's 8), times √hidden under embed_scale."""

    def __init__(self, config: ModuleConfig, *, context: Mapping[str, Any] | None = None,
                 module_fqn: str = "") -> None:
        super().__init__(_vocab(config) + int(getattr(config, "embed_extra_rows", 0) or 0), embed_width(config))
        # Gemma: the looked-up rows times √hidden, rounded to the table's dtype first (as transformers').
        self.scale = float(config.hidden) ** 0.5 if getattr(config, "embed_scale", False) else 0.0

    def forward(self, input: Tensor) -> Tensor:
        """Return the rows of `input`'s token ids, scaled where the config states embed_scale."""
        rows: Tensor = super().forward(input)
        if not self.scale:
            return rows
        # A Python number (a DTensor's rows under tp take no plain tensor), the table's dtype's rounding of √hidden.
        return rows * float(torch.tensor(self.scale, dtype=self.weight.dtype))


class OutputHead(nn.Linear):
    """The output head: hidden states onto the config's vocab, biased when the config states head_bias (Phi)."""

    local_output = False
    """Under tp its logits stay a DTensor split over the vocabulary (for torch's loss_parallel)."""

    def __init__(self, config: ModuleConfig, *, context: Mapping[str, Any] | None = None,
                 module_fqn: str = "") -> None:
        super().__init__(embed_width(config), _vocab(config), bias=bool(getattr(config, "head_bias", False)))


class InputProjection(nn.Linear):
    """project_in: the embed_width-wide token embeddings up to hidden, no bias (OPT-350m)."""

    def __init__(self, config: ModuleConfig, *, context: Mapping[str, Any] | None = None,
                 module_fqn: str = "") -> None:
        super().__init__(embed_width(config), config.hidden, bias=False)


class OutputProjection(nn.Linear):
    """project_out: the last hidden states down to embed_width before the head, no bias (OPT-350m)."""

    def __init__(self, config: ModuleConfig, *, context: Mapping[str, Any] | None = None,
                 module_fqn: str = "") -> None:
        super().__init__(config.hidden, embed_width(config), bias=False)


class MTPProjection(nn.Linear):
    """mtp_proj: an MTP layer's normalised [embedding, hidden] (2·hidden wide) back to hidden, no bias."""

    gather_output = True
    """Under tp its column-split output is gathered whole for the decoder layer after it (hpdsl/torch/layout.py)."""

    def __init__(self, config: ModuleConfig, *, context: Mapping[str, Any] | None = None,
                 module_fqn: str = "") -> None:
        super().__init__(2 * config.hidden, config.hidden, bias=False)


__all__ = ["Embedding", "InputProjection", "MTPProjection", "OutputHead", "OutputProjection", "embed_width"]
