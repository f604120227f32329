"""What a family's `cost { }` block may say: its units, the terms the estimator prices, the names it reads.

One vocabulary for the checker (hpdsl/check/cost_terms.py) and the estimator
(hpdsl/cost/facts/cost_terms.py), light enough for `hpdsl compile` to import.
"""

from __future__ import annotations

from hpdsl.ir.nodes import DimIR
from hpdsl.model import ops as OP
from hpdsl.model.fields import FIELDS

UNITS = ("flops", "saved", "eager")
"""The units a cost term may state: forward FLOPs per token, elements per token saved for the backward, or what
the module's eager PyTorch code dispatches (EAGER_TERMS)."""

FLOPS, SAVED, EAGER = UNITS

EAGER_TERMS: dict[str, str] = {
    "calls": "aten calls the reference module dispatches in one forward and backward, per micro-batch",
    "moved": "elements its non-matmul aten calls read and write per token, forward and backward",
}
"""The terms an `eager` cost line names: what the time model prices an eager implementation's host and
elementwise work by where the device states a call_overhead (docs/cost-model.md, "Eager execution")."""

BYTE_CLASSES: dict[str, str] = {
    "compute": "the compute dtype (the strategy's activation width)",
    "softmax": "the softmax output's dtype (the strategy's softmax_bytes)",
    "cast": "the compute dtype, kept only where the scores are a copy of the softmax output "
            "(a cast from another softmax dtype, or the attention dropout)",
    "norm": "a norm's input width (the profile's norm_bytes)",
    "mask": "a dropout mask's bytes per element (the profile's dropout_bytes; 0 without dropout)",
    "fp32": "4 bytes (fp32 statistics)",
}
"""The byte classes a `saved` term is kept at (`at NAME`; compute when unstated), and what each is."""

FIXED_BYTES = ("norm", "mask", "fp32")
"""The byte classes whose width is a run fact, the same over a search grid (the others are strategy columns)."""

FLOAT_NAMES: tuple[str, ...] = tuple(name for name, field in FIELDS.items() if field.type == "float")
"""The model fields a cost term may read beside the dims (hpdsl.bound.config.DIM_NAMES): the float ones."""

CHOICE_NAMES: tuple[str, ...] = tuple(name for name, field in FIELDS.items() if field.type == "choice")
"""The model fields a cost term's `if` may compare to one of their choices (`if norm == layernorm`): the choice ones."""

KEYS = "keys"
"""The name a term reads for the keys a query attends to (causal and window aware)."""

TERMS: dict[str, tuple[str | None, int]] = {
    "attBMM": (OP.ATT_BMM, 2),
    "softmax": (OP.SOFTMAX, 1),
    "headCast": (OP.HEAD_CAST, 1),
    "indexer": (OP.ATT_MM, OP.PROJECTIONS_PER_ATTENTION),
    "softcap": (OP.SOFTMAX, 1),
    "qkNorm": (None, 1),
    "linrec": (OP.LINREC, 1),
    "linrecSolve": (OP.LINREC, 1),
    "scan": (OP.ATT_MM, OP.PROJECTIONS_PER_ATTENTION),
    "scanUpdate": (OP.ATT_MM, OP.PROJECTIONS_PER_ATTENTION),
    "mixer": (OP.ATT_MM, OP.PROJECTIONS_PER_ATTENTION),
    "ffn": (OP.FF_MM, 0),
    "ffAct": (OP.FF_ACT, 1),
}
"""The terms a family may declare: the op whose count says how often a layer runs it, and its count per mixer.

None: once in a layer with any mixer (its attMM count nonzero), however many; 0: once in a layer whose
count of the op is nonzero. A `saved` term is named by the work that saves it and counted as that work
is (`saved scan`: once per mixer; `saved softmax`: once per softmax the kind's ops count). `mixer` is
once per mixer, for what no other term's work names (an attention's output, its latents); `ffn` once
per feed-forward (a layer with ffMM), for what a feed-forward's module keeps (its input, its matrices'
outputs, a router's scores); `ffAct` once per activation the kind's ffAct counts (an activation's input).
"""

FEED_FORWARD_TERMS = frozenset({"ffn", "ffAct"})
"""The feed-forward's terms, each run by every slot declaring it: a MoE block's router, experts and shared
experts are its parts, not copies of one module (the mixer terms are shared by the slots declaring them)."""

SAVED_ONLY = FEED_FORWARD_TERMS
"""The terms only a `saved` term names: the feed-forward's FLOPs are its layouts' matmuls and the op counts'."""


def keys_degree(expr: DimIR) -> int | None:
    """Return the degree of an expression in `keys` (0 or 1 are priceable); None when `keys` divides."""
    if expr.op == "int":
        return 0
    if expr.op == "name":
        return int(expr.name == KEYS)
    if expr.op == "sum":
        degrees = [keys_degree(d) for d in expr.operands]
        return None if None in degrees else max(d for d in degrees if d is not None)
    if any(keys_degree(d) != 0 for d in expr.divisors):
        return None
    degrees = [keys_degree(d) for d in expr.operands]
    return None if None in degrees else sum(d for d in degrees if d is not None)


__all__ = ["BYTE_CLASSES", "CHOICE_NAMES", "EAGER", "EAGER_TERMS", "FEED_FORWARD_TERMS", "FIXED_BYTES", "FLOAT_NAMES",
           "FLOPS", "KEYS", "SAVED", "SAVED_ONLY", "TERMS", "UNITS", "keys_degree"]
