"""The tokens `hpdsl train` trains on: synthetic ones from the seed, or a memory-mapped token file.

A token file is a flat stream of token ids: `.bin` of uint16 or uint32 (the
nanoGPT / Megatron convention; `--data-dtype` says which) or a 1-D integer
`.npy`. It is cut into sequences of seq + 1 + D tokens (the labels' shift and
the MTP depths: hpdsl/torch/objective.py); step k's global batch is sequences
k·rows … (k+1)·rows − 1, wrapping around the file. A rank reads, through the
memory map, only its rows (its data-parallel share) and its cp chunk of
positions, so no rank reads the whole file, and the position in the data is the
step itself: a resumed run reads what an uninterrupted one would
(hpdsl/torch/checkpoint.py saves the step).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from hpdsl.torch.objective import draw, window

DTYPES = {"uint16": np.uint16, "uint32": np.uint32}
"""The `.bin` token widths `--data-dtype` names."""


def data_refusal(path: str, dtype: str = "uint16") -> str | None:
    """Return why `path` is not a token file this trainer reads (None: it is)."""
    suffix = Path(path).suffix
    if suffix not in (".bin", ".npy"):
        return f"--data {path}: expected a .bin (uint16/uint32 tokens) or .npy token file, found {suffix or 'no suffix'}"
    if not Path(path).is_file():  # a FIFO or a device would block or never end: regular files only
        return f"--data {path}: not a regular file"
    try:
        tokens = _open(path, dtype)
    except (OSError, ValueError) as error:
        return f"--data {path}: cannot be read as tokens ({error})"
    if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer):
        return f"--data {path}: expected a flat array of integer token ids, found {tokens.dtype} {tokens.shape}"
    if tokens.size == 0:
        return f"--data {path}: holds no tokens"
    return None


def _open(path: str, dtype: str) -> np.ndarray:
    if path.endswith(".npy"):
        return np.load(path, mmap_mode="r", allow_pickle=False)
    width = np.dtype(DTYPES[dtype]).itemsize
    size = Path(path).stat().st_size
    if size % width:
        raise ValueError(f"{size} bytes is not a whole number of {dtype} tokens")
    return np.memmap(path, dtype=DTYPES[dtype], mode="r")


class Tokens:
    """Where a step's tokens come from: the seed's synthetic ones, or a token file (memory-mapped)."""

    def __init__(self, seed: int, vocab: int, path: str | None = None, dtype: str = "uint16") -> None:
        self.seed, self.vocab, self.path = seed, vocab, path
        self.tokens = None if path is None else _open(path, dtype)

    def rank_batch(self, step: int, rows: int, seq: int, depth: int, part: tuple[slice, slice]
                   ) -> tuple[Tensor, Tensor]:
        """Return this rank's ids and labels of step `step`: its rows and its chunk of positions."""
        if self.tokens is None:
            return window(draw(step, self.seed, rows, seq, self.vocab, depth), part[0], part[1], depth)
        span = seq + 1 + depth
        count = len(self.tokens) // span
        if count == 0:
            raise ValueError(f"--data {self.path}: {len(self.tokens)} tokens, fewer than one sequence of {span}")
        start, stop = part[1].start or 0, seq if part[1].stop is None else part[1].stop
        picked = [(step * rows + row) % count for row in range(*part[0].indices(rows))]
        local = np.stack([np.asarray(self.tokens[i * span + start:i * span + stop + 1 + depth]) for i in picked])
        if local.size and int(local.max()) >= self.vocab:
            raise ValueError(f"--data {self.path}: token id {int(local.max())} is not below the model's vocab "
                             f"{self.vocab}")
        ids = torch.from_numpy(local.astype(np.int64))
        return window(ids, slice(None), slice(0, stop - start), depth)
