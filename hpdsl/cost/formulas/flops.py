"""Op counts of a layer kind into forward FLOPs per token, and over a grid into FLOPs per device.

The weight matmuls are every slot's family layout (hpdsl/cost/facts/matmuls.py,
docs/cost-model.md "Weight matmuls from the layouts"): 2 FLOPs per multiply-add
of the slots the op counts build. Every other op contributes its count times a
per-unit cost (docs/reference.md#flop-formulas, corrected as docs/cost-model.md
says): score matmuls at 2 FLOPs per multiply-add,
elementwise ops at the upstream per-element constants divided by three
(upstream folds the forward and a backward of twice the forward into one
number). The backward is twice the forward; recompute adds the forward of what
is recomputed: every op under full recompute, the score matmul QKᵀ, softmax and
score casts under selective.

FLOPs are linear in the op counts: the difference between two stacks is exactly
the terms of the ops one lacks. `layer_flop_terms` splits a layer's FLOPs term
by term (the matrix products torch's FlopCounterMode measures apart from the
elementwise work it does not), and `forward_flops_by_term` prices them for a
batch, which is how docs/validation.md compares the estimator with built models.
"""

from __future__ import annotations

from collections.abc import Iterable

from typing import Any, TypeVar

import attrs
import numpy as np

from hpdsl.cost.formulas import xp

from hpdsl.bound.bind import CostModel, LayerConfig
from hpdsl.cost.facts.columns import Column, ModelColumns, model_columns
from hpdsl.cost.facts.cost_terms import DeclaredTerm
from hpdsl.cost.facts.matmuls import Macs, Matmuls
from hpdsl.cost.facts.roles import MIXER_ROLES
from hpdsl.cost.formulas.context import Ctx
from hpdsl.cost.formulas.xp import Val
from hpdsl.model import ops as OP
from hpdsl.model.ops import count as op_count

_Seq = TypeVar("_Seq", float, np.ndarray)

SOFTMAX = 13 / 3     # forward FLOPs per score element (upstream: 13 with the backward)
HEAD_CAST = 1.0      # per score element (upstream: 3)
DROPOUT = 1.0        # per hidden element (upstream: 3)
NORM = 10.0          # per element (upstream: 30)
FF_ACT = 7.0         # per element of the activation's input (upstream: 21)
BACKWARD = 2.0       # backward FLOPs per forward FLOP
LINEAR_CHUNK = 64    # tokens per chunk of the delta rule families/gated_delta_net.hpf prices (FLA's kernels)
SOFT_CAP = 3.0       # per capped logit: c·tanh(x / c), as families/attention.hpf prices a capped score (Gemma 2)

MATMUL_TERMS = ("attMM", "attBMM", "indexer", "linrec", "conv", "scan", "ffMM", "router", "output", "embedding",
                "mtp")
"""The terms that are matrix products or convolutions: what FlopCounterMode counts (2 per multiply-add)."""


@attrs.frozen
class FlopCoeffs:
    """Forward FLOPs of one column per token, by divisor."""

    t: float = 0.0        # divided by t (head- or width-split work; routed experts, balanced)
    ts: float = 0.0       # per key, divided by t (score work)
    sp: float = 0.0       # divided by sp (replicated across TP unless sequence parallel)
    sel_ts: float = 0.0   # per key: what selective recompute runs again
    w: float = 0.0        # a tp-replicated mixer's work: every tp rank runs it whole, not divided
    w_ts: float = 0.0     # per key: a tp-replicated mixer's score work, not divided
    sel_w_ts: float = 0.0  # per key: what selective recompute runs again of it

    def per_token(self, seq: _Seq) -> _Seq:
        """Return model-wide forward FLOPs per token at sequence length `seq`."""
        return self.t + self.ts * seq + self.sp + self.w + self.w_ts * seq

    def __add__(self, other: FlopCoeffs) -> FlopCoeffs:
        return FlopCoeffs(*(a + b for a, b in zip(attrs.astuple(self), attrs.astuple(other))))

    def whole(self) -> FlopCoeffs:
        """Return these FLOPs run whole on every tp rank (a mixer its family layout replicates)."""
        return FlopCoeffs(w=self.t + self.sp + self.w, w_ts=self.ts + self.w_ts,
                          sel_w_ts=self.sel_ts + self.sel_w_ts)


def matmul_coeffs(macs: Macs) -> FlopCoeffs:
    """Return weight multiply-adds per token as forward FLOPs: 2 per multiply-add, split over tp or on sp."""
    return FlopCoeffs(t=float(2 * macs.split), sp=float(2 * macs.replicated))


def declared_coeffs(terms: tuple[DeclaredTerm, ...]) -> dict[str, FlopCoeffs]:
    """Return a column's declared cost terms (its families' `cost { }` blocks) as forward FLOP coefficients, by name.

    A term split over tp is t and ts (sel_ts its per-key work when selective
    recompute runs it again); a replicated one runs whole on every tp rank: w,
    w_ts and sel_w_ts.
    """
    out: dict[str, FlopCoeffs] = {}
    for term in terms:
        t, ts = float(term.t), float(term.ts)
        sel = ts if term.selective else 0.0
        coeffs = (FlopCoeffs(w=t, w_ts=ts, sel_w_ts=sel) if term.replicated
                  else FlopCoeffs(t=t, ts=ts, sel_ts=sel))
        out[term.name] = out[term.name] + coeffs if term.name in out else coeffs
    return out


def layer_flop_terms(cfg: LayerConfig, matmuls: Matmuls) -> dict[str, FlopCoeffs]:
    """Return one layer's forward FLOP coefficients term by term; they sum to layer_flop_coeffs.

    The weight matmuls are the layer's slots' layouts (`matmuls`,
    hpdsl/cost/facts/matmuls.py): attMM a mixer's projections (MLA's latent
    down-projections and a DSA indexer's projections replicated, on sp), conv
    its convolutions' taps, ffMM the MLP's, the experts' (top_k of them per
    token) and the shared experts' matrices. What a mixer computes beside its
    weights is its family's `cost { }` block (`matmuls.declared`,
    hpdsl/cost/facts/cost_terms.py), each run as the kind's op vector counts it:
    attBMM QKᵀ and A·V, softmax and headCast the score elementwise work; indexer
    a DSA indexer's scores over every key, replicated over tp (w_ts); softcap
    the scores' modifiers (soft-capping; ALiBi's one add per score); qkNorm the per-head norms; linrec and linrecSolve
    the delta rule's products and its triangular inverses; scan and scanUpdate
    a state-space mixer's. The op counts price the rest: normOp, dropout; ffAct
    the activations; router the router (and a shared expert's gate).
    """
    ops = cfg.ops
    act, router = _ffn_flops(cfg)
    declared = declared_coeffs(matmuls.declared)
    return {
        "attMM": matmul_coeffs(matmuls.of("attMM")),
        **{name: declared.get(name, FlopCoeffs()) for name in ("attBMM", "indexer", "softmax", "headCast", "softcap",
                                                               "qkNorm", "linrec", "linrecSolve")},
        "conv": matmul_coeffs(matmuls.of("conv")),
        "scan": declared.get("scan", FlopCoeffs()),
        "scanUpdate": declared.get("scanUpdate", FlopCoeffs()),
        "normOp": FlopCoeffs(sp=op_count(ops, OP.NORM) * NORM * cfg.hidden),
        "dropout": FlopCoeffs(sp=op_count(ops, OP.DROPOUT) * DROPOUT * cfg.hidden),
        "ffMM": matmul_coeffs(matmuls.of("ffMM")),
        "ffAct": FlopCoeffs(t=act),
        "router": FlopCoeffs(sp=router),
    }


MIXER_TERMS = ("attMM", "attBMM", "indexer", "softmax", "headCast", "softcap", "qkNorm", "linrec", "linrecSolve",
               "conv", "scan", "scanUpdate")
"""The terms of a layer's mixer (attention, linear attention or MLA); the rest are norms and the FFN."""


def layer_flop_coeffs(cfg: LayerConfig, matmuls: Matmuls, whole: frozenset[str] = frozenset()) -> FlopCoeffs:
    """Return the forward FLOP coefficients of one layer priced with `cfg` and its slots' `matmuls`.

    When `whole` names the layer's mixer role (its family layout replicates it,
    hpdsl/cost/facts/replication.py), the mixer's terms run whole on every tp rank:
    they move to the undivided w, w_ts and sel_w_ts. Model-wide FLOPs
    (per_token, model_forward) are the same either way.
    """
    terms = layer_flop_terms(cfg, matmuls)
    if MIXER_ROLES & whole:
        terms = {name: c.whole() if name in MIXER_TERMS else c for name, c in terms.items()}
    return _sum(terms.values())


def _ffn_flops(cfg: LayerConfig) -> tuple[float, float]:
    """Return per-token feed-forward activations (split by t) and the replicated router's FLOPs."""
    acts, h = op_count(cfg.ops, OP.FF_ACT), cfg.hidden
    if cfg.experts <= 1 or not OP.ffn_matrices(cfg.ops):  # a mixer-only layer (ffMM 0) routes nothing
        return acts * FF_ACT * cfg.ffn_width, 0.0
    widths = cfg.top_k * cfg.ffn_width + cfg.shared_experts * cfg.shared_width
    router = 2 * h * cfg.experts + (2 * h if cfg.shared_experts and cfg.shared_gate else 0)
    return acts * FF_ACT * widths, router


def output_flop_terms(hidden: int, matmuls: Matmuls, *, capped_logits: int = 0) -> dict[str, FlopCoeffs]:
    """Return the output layer's terms: the head's matrix (vocab-parallel, from its layout), the final norm.

    `capped_logits` (the vocabulary when the model states final_softcap) adds the
    logits' soft-capping, SOFT_CAP per logit, vocab-parallel like the projection.
    """
    terms = {"output": matmul_coeffs(matmuls.of("output")), "normOp": FlopCoeffs(sp=NORM * hidden)}
    if capped_logits:
        terms["logitCap"] = FlopCoeffs(t=SOFT_CAP * capped_logits)
    return terms


def output_flop_coeffs(hidden: int, matmuls: Matmuls, *, capped_logits: int = 0) -> FlopCoeffs:
    """Return the final norm and the output projection (vocab-parallel), its soft-capping with `capped_logits`."""
    return _sum(output_flop_terms(hidden, matmuls, capped_logits=capped_logits).values())


def _capped_logits(model: Any) -> int:
    """Return the logits a model's final soft-capping caps per token: its vocabulary, or 0 without final_softcap."""
    return int(model.vocab) if model.final_softcap else 0


def embedding_flop_terms(matmuls: Matmuls) -> dict[str, FlopCoeffs]:
    """Return the embedding's terms: a lookup is no FLOP; a projection its layout declares beside the table is."""
    return {"embedding": matmul_coeffs(matmuls.of("embedding"))}


def forward_flops_by_term(cost_model: CostModel, *, batch: int, seq_len: int, windowed: bool = False
                          ) -> dict[str, dict[str, float]]:
    """Return the forward FLOPs of one layer of each body kind and of the output layer, term by term.

    Model-wide (every parallel degree 1) for `batch` sequences of `seq_len`
    tokens; keys are the pricing columns' names (a kind, "layer" for a model
    without kinds, "output"). Scores over the whole square (what an eager
    kernel computes before masking, sliding layers included): summed over the
    stack they give the estimate's forward FLOPs without flash and MTP layers.
    `windowed` prices a sliding-window layer's scores over min(s, w) keys per
    query instead: the model convention, and what a banded kernel computes.
    """
    columns = model_columns(cost_model)
    out: dict[str, dict[str, float]] = {}
    for column in columns.columns:
        keys = float(seq_len)
        if column.role == "layer":
            assert column.config is not None
            terms = layer_flop_terms(column.config, column.matmuls)
            if windowed:
                keys = float(attended_keys(float(seq_len), column.config.window or column_chunk(column)))
        elif column.role == "output":
            terms = output_flop_terms(cost_model.model.hidden, column.matmuls,
                                      capped_logits=_capped_logits(cost_model.model))
        elif column.role == "embedding" and column.matmuls.of("embedding").total:
            terms = embedding_flop_terms(column.matmuls)
        else:
            continue
        out[column.name] = {name: batch * seq_len * (c.per_token(0.0) + (c.ts + c.w_ts) * keys)
                            for name, c in terms.items()}
    return out


def column_window(column: Column) -> int:
    """Return the sliding window a column's self-attention attends through (0: the whole prefix)."""
    return column.config.window if column.config is not None else 0


def column_chunk(column: Column) -> int:
    """Return the chunk a column's rotary self-attention attends within (Llama 4's attention_chunk; 0: none)."""
    return column.config.chunk if column.config is not None else 0


def _sum(terms: Iterable[FlopCoeffs]) -> FlopCoeffs:
    total = FlopCoeffs()
    for term in terms:
        total = total + term
    return total


def column_flop_coeffs(column: Column, columns: ModelColumns) -> FlopCoeffs:
    """Return the forward FLOP coefficients of any column (the embedding's lookup is none, its projections some)."""
    model = columns.cost_model.model
    if column.role == "embedding":
        return _sum(embedding_flop_terms(column.matmuls).values())
    if column.role == "output":
        return output_flop_coeffs(model.hidden, column.matmuls, capped_logits=_capped_logits(model))
    assert column.config is not None
    layer = layer_flop_coeffs(column.config, column.matmuls, column.whole)
    if column.role == "layer":
        return layer
    out = output_flop_coeffs(model.hidden, columns.columns[columns.output].matmuls, capped_logits=_capped_logits(model))
    # MTP: two input norms, the projection its mtp_proj slot's layout declares, then its head norm and the head.
    return layer + FlopCoeffs(sp=2 * NORM * model.hidden) + matmul_coeffs(column.matmuls.of("mtp")) + out


# --------------------------------------------------------------------------
# One column over a grid (arrays) or for one strategy (floats): hpdsl/cost/formulas/xp.py
# --------------------------------------------------------------------------


def causal_window_keys(seq: Val, window: int) -> Val:
    """Return the mean keys a causal query attends to over `seq` positions, each seeing at most `window`.

    The area of the causal band (docs/cost-model.md#sliding-window-attention):
    s/2 for full attention, w − w²/(2s) for a window w < s (query i sees
    min(i+1, w) keys; s·w − w(w−1)/2 in all, to the continuous area's w/2).
    """
    if not window:
        return seq / 2
    beyond = xp.maximum(seq - window, 0.0)
    return seq / 2 - beyond * beyond / (2 * seq)


def attended_keys(seq: Val, window: int) -> Val:
    """Return the keys per query of the model convention: s, or min(s, w) for a sliding-window layer."""
    return xp.minimum(seq, window) if window else seq


def chunked_keys(seq: Val, chunk: int) -> Val:
    """Return the mean keys a causal query attends to over `seq` positions cut into chunks of `chunk`.

    Each query sees its own chunk's keys up to itself: the area of ⌊s/c⌋ whole chunks' c²/2
    and the last one's r²/2 (r = s − c·⌊s/c⌋) over s queries, s/2 within one chunk
    (docs/cost-model.md#chunked-attention).
    """
    whole = seq // chunk
    rest = seq - whole * chunk
    return (whole * chunk * chunk + rest * rest) / (2 * seq)


def executed_keys(x: Ctx, causal: float, window: int = 0, chunk: int = 0) -> Val:
    """Return the keys each query's score work runs over: the causal share's band under flash.

    A flash kernel skips the blocks a causal mask empties (about half the s×s
    square) and, for a sliding-window layer, the blocks beyond the window;
    without flash the whole score matrix is computed, then masked (transformers'
    eager attention does this for sliding layers too). `causal` is the share of
    the column's score work that is causal self-attention; `window` the layer's
    sliding window (0: none), which only that causal share attends through.
    Under context parallelism each rank's tok = s·b/cp queries see the same
    band: a query chunk needs only the keys within the window. A chunked layer
    (`chunk`, Llama 4's) runs each chunk's causal square under flash.
    """
    if chunk:
        return xp.where(x.flash, (1.0 - causal) * x.seq_len + causal * chunked_keys(x.seq_len, chunk), x.seq_len)
    if not window:
        return x.seq_len * xp.where(x.flash, 1.0 - causal / 2, 1.0)
    return xp.where(x.flash, (1.0 - causal) * x.seq_len + causal * causal_window_keys(x.seq_len, window), x.seq_len)


def model_keys(x: Ctx, causal: float, window: int = 0, chunk: int = 0) -> Val:
    """Return the keys per query of the model (MFU) convention: s, min(s, w or c) for the windowed or chunked causal share."""
    if not (window or chunk):
        return x.seq_len
    return (1.0 - causal) * x.seq_len + causal * attended_keys(x.seq_len, window or chunk)


def device_forward(c: FlopCoeffs, x: Ctx, keys: Val) -> Val:
    """Return one layer's executed forward FLOPs per micro-batch on one device (a replicated mixer's in full)."""
    split = x.tokens * ((c.t + c.ts * keys) / x.tp + c.sp / x.sp_shards)
    return split + x.tokens * (c.w + c.w_ts * keys) if c.w or c.w_ts else split


def device_flash_backward(c: FlopCoeffs, x: Ctx, keys: Val) -> Val:
    """Return what a flash backward runs again per micro-batch on one device: QKᵀ and the softmax."""
    again = x.tokens * c.sel_ts * keys / x.tp + x.tokens * c.sel_w_ts * keys
    return xp.where(x.flash, again, 0.0)


def device_scores(c: FlopCoeffs, x: Ctx, keys: Val) -> Val:
    """Return one layer's score FLOPs per micro-batch on one device (what hides a ring's transfers)."""
    return x.tokens * c.ts * keys / x.tp + x.tokens * c.w_ts * keys


def device_recompute(c: FlopCoeffs, x: Ctx, forward: Val, keys: Val) -> Val:
    """Return what the strategy's recompute runs again per micro-batch on one device."""
    selective = x.tokens * c.sel_ts * keys / x.tp
    if c.sel_w_ts:
        selective = selective + x.tokens * c.sel_w_ts * keys
    return xp.where(x.recompute == 2, forward, xp.where(x.recompute == 1, selective, 0.0))


def model_forward(c: FlopCoeffs, x: Ctx, keys: Val) -> Val:
    """Return one layer's model-wide executed forward FLOPs per sequence."""
    return x.seq_len * (c.t + c.sp + c.w + (c.ts + c.w_ts) * keys)


def model_flash_backward(c: FlopCoeffs, x: Ctx, keys: Val) -> Val:
    """Return one layer's model-wide flash-backward recompute (QKᵀ, softmax) per sequence."""
    return xp.where(x.flash, x.seq_len * (c.sel_ts + c.sel_w_ts) * keys, 0.0)


def model_recompute(c: FlopCoeffs, x: Ctx, keys: Val) -> Val:
    """Return one layer's model-wide recompute FLOPs per sequence under the strategy."""
    full = model_forward(c, x, keys)
    selective = x.seq_len * (c.sel_ts + c.sel_w_ts) * keys
    return xp.where(x.recompute == 2, full, xp.where(x.recompute == 1, selective, 0.0))


# --------------------------------------------------------------------------
# The model convention (MFU): parameter matmuls and the attended score square
# --------------------------------------------------------------------------


MODEL_TERMS = ("attMM", "conv", "ffMM", "router", "output", "embedding")
"""Matrix products with parameters: 2 FLOPs per parameter a token multiplies (PaLM's 6N with the backward)."""


@attrs.frozen
class ModelFlops:
    """One column's forward FLOPs in the model convention: per token, and per token and key (scores)."""

    per_token: float = 0.0
    per_key: float = 0.0


def column_model_flops(column: Column, columns: ModelColumns) -> ModelFlops:
    """Return a column's forward model FLOPs: its parameter matmuls and score matmuls per attended key.

    PaLM's convention (Chowdhery et al. 2022, appendix B): 6N + 12·L·a·d_h·s per
    token with the backward; elementwise work, the delta rule's state products
    and the flash backward's recompute are executed work, not model FLOPs; a DSA
    indexer's score matmuls are score work (per_key) like QKᵀ. per_key is priced
    over s keys per query, min(s, w) for a sliding-window layer (model_keys): the
    keys its queries can attend to.
    """
    model = columns.cost_model.model
    if column.role == "embedding":
        return ModelFlops(per_token=embedding_flop_terms(column.matmuls)["embedding"].per_token(0.0))
    out = output_flop_terms(model.hidden, columns.columns[columns.output].matmuls)["output"].per_token(0.0)
    if column.role == "output":
        return ModelFlops(per_token=out)
    assert column.config is not None
    terms = layer_flop_terms(column.config, column.matmuls)
    per_token = sum(terms[name].t + terms[name].sp for name in MODEL_TERMS if name in terms)
    if column.role == "mtp":  # its projection (the mtp_proj slot's layout) and the shared head
        per_token += 2 * float(column.matmuls.of("mtp").total) + out
    return ModelFlops(per_token=per_token, per_key=terms["attBMM"].ts + terms["indexer"].w_ts)


def causal_share(column: Column, columns: ModelColumns) -> float:
    """Return the share of a column's score work that is causal self-attention.

    As the torch backend builds them (hpdsl/torch/model.py): an encoder-decoder's
    encoder attends both ways and a decoder layer's cross-attention (half its
    score work) attends to the whole encoder output; every other mixer is causal.
    """
    if column.config is None:
        return 0.0
    kinds = {g.kind for g in columns.cost_model.model.groups}
    if {"encoder", "decoder"} <= kinds and column.kind == "encoder":
        return 0.0
    attentions = op_count(column.config.ops, OP.ATT_MM) / 4
    return 0.5 if attentions == 2 else 1.0
