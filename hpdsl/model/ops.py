"""What each op of a kind's vector means to the estimator, the checks and the backend, in one place.

A profile's vocabulary (profiles/ops.hpf) names the ops its kinds count; the
estimator prices exactly the ops of PRICED, and the backend reads a layer's
shape from the same counts (attentions, feed-forward matrices, norms). Every
consumer reads op counts through the functions here, never by string, so a
vocabulary the estimator cannot price is reported by the checker
(`unpriced-vocabulary`) instead of pricing zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

ATT_MM = "attMM"
ATT_BMM = "attBMM"
FF_MM = "ffMM"
SOFTMAX = "softmax"
DROPOUT = "dropout"
NORM = "normOp"
GATHER = "gather"
HEAD_CAST = "headCast"
FF_ACT = "ffAct"
LINREC = "linrec"

PRICED: dict[str, str] = {
    ATT_MM: "attention projections (q, k, v, o): 4 per attention",
    ATT_BMM: "batched score matmuls (Q·Kᵀ and A·V): 2 per attention",
    FF_MM: "feed-forward projections: 3 when gated, 2 when plain",
    SOFTMAX: "softmax over the attention scores",
    DROPOUT: "dropout applications",
    NORM: "normalisations",
    GATHER: "tensor-parallel all-gathers",
    HEAD_CAST: "casts of the per-head score tensor",
    FF_ACT: "feed-forward activation functions",
    LINREC: "linear-attention (delta rule) state updates",
}
"""The ops the estimator prices and what a count of each means; every vocabulary must name them all."""

PROJECTIONS_PER_ATTENTION = 4


def count(ops: Mapping[str, int], op: str) -> int:
    """Return the count of `op` in a vector (0 when the vector does not count it)."""
    return int(ops.get(op, 0))


def attentions(ops: Mapping[str, int]) -> Fraction:
    """Return the attentions a vector prices: its attention projections over 4 (2 with cross-attention)."""
    return Fraction(count(ops, ATT_MM), PROJECTIONS_PER_ATTENTION)


def ffn_matrices(ops: Mapping[str, int]) -> int:
    """Return the feed-forward matrices a vector prices (3 gated, 2 plain, 0 for none)."""
    return count(ops, FF_MM)


def norms(ops: Mapping[str, int]) -> int:
    """Return the normalisations a vector prices per layer."""
    return count(ops, NORM)


def unpriced(vocabulary: Iterable[str]) -> tuple[list[str], list[str]]:
    """Return (priced ops the vocabulary lacks, vocabulary ops the estimator gives no meaning)."""
    names = list(vocabulary)
    return [op for op in PRICED if op not in names], [op for op in names if op not in PRICED]


__all__ = ["ATT_BMM", "ATT_MM", "DROPOUT", "FF_ACT", "FF_MM", "GATHER", "HEAD_CAST", "LINREC", "NORM", "PRICED",
           "SOFTMAX", "attentions", "count", "ffn_matrices", "norms", "unpriced"]
