"""Op counts of a layer kind into forward FLOPs per token, and over a grid into FLOPs per device.

Each op contributes its count times a per-unit cost (domain.md §4.5, corrected as
docs/cost-model.md says): matmuls at 2 FLOPs per multiply-add, elementwise ops at
the upstream per-element constants divided by three (upstream folds the forward
and a backward of twice the forward into one number). The backward is twice the
forward; recompute adds the forward of what is recomputed: every op under full
recompute, the score matmul QKᵀ, softmax and score casts under selective.

FLOPs are linear in the op counts: the difference between two stacks is exactly
the terms of the ops one lacks.
"""

from __future__ import annotations

import attrs
import numpy as np

from hpdsl.cost.bind import LayerConfig
from hpdsl.cost.columns import Column, ModelColumns
from hpdsl.cost.context import Ctx
from hpdsl.cost.memory import attention_widths

SOFTMAX = 13 / 3     # forward FLOPs per score element (upstream: 13 with the backward)
HEAD_CAST = 1.0      # per score element (upstream: 3)
DROPOUT = 1.0        # per hidden element (upstream: 3)
NORM = 10.0          # per element (upstream: 30)
FF_ACT = 7.0         # per element of the activation's input (upstream: 21)
BACKWARD = 2.0       # backward FLOPs per forward FLOP


@attrs.frozen
class FlopCoeffs:
    """Forward FLOPs of one column per token, by divisor."""

    t: float = 0.0        # divided by t (head- or width-split work; routed experts, balanced)
    ts: float = 0.0       # per key, divided by t (score work)
    sp: float = 0.0       # divided by sp (replicated across TP unless sequence parallel)
    sel_ts: float = 0.0   # per key: what selective recompute runs again

    def per_token(self, seq: float) -> float:
        """Return model-wide forward FLOPs per token at sequence length `seq`."""
        return self.t + self.ts * seq + self.sp


def projection_macs(cfg: LayerConfig) -> tuple[float, float]:
    """Return one attention's projection multiply-adds per token: (TP-split, replicated).

    MLA's latent down-projections are replicated over TP (Megatron builds them
    duplicated); gated DeltaNet adds its two per-head gate projections (β, decay).
    """
    h, a, d_h = cfg.hidden, cfg.heads, cfg.head_dim
    if cfg.attn_kind == "mla":
        d_qk = (cfg.nope_dim or d_h) + cfg.rope_dim
        dcq, dckv = cfg.q_lora_rank, cfg.kv_lora_rank
        query_up = dcq * a * d_qk if dcq else h * a * d_qk
        split = query_up + dckv * cfg.kv_heads * ((cfg.nope_dim or d_h) + d_h) + a * d_h * h
        return split, h * dcq + h * (dckv + cfg.rope_dim)
    gate = 2 if cfg.output_gate else 1
    d_q = a * d_h
    split = gate * h * d_q + 2 * h * cfg.kv_heads * d_h + d_q * h
    if cfg.attn_kind == "linear":
        split += 2 * h * cfg.lin_value_heads
    return split, 0.0


def linear_recurrence(cfg: LayerConfig) -> float:
    """Return one delta-rule update's forward FLOPs per token.

    Per value head: three d_k×d_v matrix-vector products (state read-out, the
    delta's prediction, the rank-one update) and the short convolution over q, k, v.
    """
    n_v, d_k, d_v = cfg.lin_value_heads, cfg.lin_key_head_dim, cfg.lin_value_head_dim
    conv = 2 * cfg.lin_conv * (2 * cfg.lin_key_heads * d_k + n_v * d_v)
    return 6 * n_v * d_k * d_v + conv


def layer_flop_coeffs(cfg: LayerConfig) -> FlopCoeffs:
    """Return the forward FLOP coefficients of one layer priced with `cfg`."""
    ops, h, a = cfg.ops, cfg.hidden, cfg.heads
    att = ops.get("attMM", 0) / 4
    split, replicated = projection_macs(cfg)
    q_w, _, v_w = attention_widths(cfg)
    qk_dim, v_dim = q_w / max(a, 1), v_w / max(cfg.kv_heads, 1)
    score = ops.get("attBMM", 0) * a * (qk_dim + v_dim)  # QKᵀ and A·V, one unit each
    elementwise = ops.get("softmax", 0) * SOFTMAX * a + ops.get("headCast", 0) * HEAD_CAST * a
    t = 2 * att * split + ops.get("linrec", 0) * linear_recurrence(cfg)
    t += cfg.qk_norms * NORM * (a + cfg.kv_heads) * cfg.head_dim
    sp = 2 * att * replicated + ops.get("normOp", 0) * NORM * h + ops.get("dropout", 0) * DROPOUT * h
    ffn_t, ffn_sp = _ffn_flops(cfg)
    return FlopCoeffs(t=t + ffn_t, ts=score + elementwise, sp=sp + ffn_sp,
                      sel_ts=ops.get("attBMM", 0) * a * qk_dim + elementwise)  # QKᵀ again


def _ffn_flops(cfg: LayerConfig) -> tuple[float, float]:
    """Return (TP-split, replicated) feed-forward FLOPs per token: MLP, or experts and router."""
    n_ff, acts, h = cfg.ops.get("ffMM", 0), cfg.ops.get("ffAct", 0), cfg.hidden

    def mlp(width: float) -> float:
        return n_ff * 2 * h * width + acts * FF_ACT * width

    if cfg.experts <= 1:
        return mlp(cfg.ffn_width), 0.0
    experts = cfg.top_k * mlp(cfg.ffn_width) + cfg.shared_experts * mlp(cfg.shared_width)
    router = 2 * h * cfg.experts + (2 * h if cfg.shared_experts and cfg.shared_gate else 0)
    return experts, router


def output_flop_coeffs(hidden: int, vocab: int) -> FlopCoeffs:
    """Return the final norm and the output projection (vocab-parallel)."""
    return FlopCoeffs(t=2 * hidden * vocab, sp=NORM * hidden)


def column_flop_coeffs(column: Column, columns: ModelColumns) -> FlopCoeffs:
    """Return the forward FLOP coefficients of any column (the embedding is a lookup: none)."""
    model = columns.cost_model.model
    if column.role == "embedding":
        return FlopCoeffs()
    if column.role == "output":
        return output_flop_coeffs(model.hidden, model.vocab)
    assert column.config is not None
    layer = layer_flop_coeffs(column.config)
    if column.role == "layer":
        return layer
    h = model.hidden
    out = output_flop_coeffs(h, model.vocab)
    # MTP: two input norms, the 2h→h projection, then its own final norm and output head.
    return attrs.evolve(layer, t=layer.t + 2 * 2 * h * h + out.t, sp=layer.sp + 2 * NORM * h + out.sp)


# --------------------------------------------------------------------------
# Vectorised
# --------------------------------------------------------------------------


def device_forward(c: FlopCoeffs, x: Ctx) -> np.ndarray:
    """Return one layer's forward FLOPs per micro-batch on one device."""
    return x.tok * ((c.t + c.ts * x.s) / x.t + c.sp / x.sp)


def device_recompute(c: FlopCoeffs, x: Ctx, forward: np.ndarray) -> np.ndarray:
    """Return what the strategy's recompute runs again per micro-batch on one device."""
    selective = x.tok * c.sel_ts * x.s / x.t
    return np.where(x.recompute == 2, forward, np.where(x.recompute == 1, selective, 0.0))


def model_forward(c: FlopCoeffs, x: Ctx) -> np.ndarray:
    """Return one layer's model-wide forward FLOPs per sequence."""
    return x.s * (c.t + c.ts * x.s + c.sp)


def model_recompute(c: FlopCoeffs, x: Ctx) -> np.ndarray:
    """Return one layer's model-wide recompute FLOPs per sequence under the strategy."""
    full = model_forward(c, x)
    selective = x.s * c.sel_ts * x.s
    return np.where(x.recompute == 2, full, np.where(x.recompute == 1, selective, 0.0))
