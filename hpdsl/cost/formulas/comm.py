"""Layer kinds and a grid into communication bytes per mesh axis and their exposed time.

Volumes are bytes one device sends (ring collectives: (n-1)/n of the buffer per
all-gather or reduce-scatter, twice that per all-reduce; all-to-all: (n-1)/n of
what it holds). An axis runs at the intra-node bandwidth when the devices of one
of its groups fit in a node (Megatron's order tp, cp, ep, dp, pp from the
innermost), else at the scale-out bandwidth. Tensor-parallel, expert all-to-all,
Ulysses and pipeline transfers sit on the critical path; ring attention hides
behind the score computation; gradient reduction hides behind the last
backward when the profile says it is overlapped.
"""

from __future__ import annotations

import attrs

from hpdsl.bound.bind import LayerConfig
from hpdsl.cost.facts.columns import Column, ModelColumns
from hpdsl.cost.facts.roles import MIXER_ROLES
from hpdsl.cost.formulas import xp
from hpdsl.cost.formulas.context import Ctx
from hpdsl.cost.formulas.xp import Val
from hpdsl.model import ops as OP
from hpdsl.model.ops import count as op_count

AXES = ("tp", "cp", "ep", "pp", "dp")


@attrs.frozen
class CommCoeffs:
    """Elements per token one forward pass of a column moves, per kind of collective."""

    tp: float = 0.0          # all-gathered / reduce-scattered over tp (the op vector's gathers × h)
    tp_sp: float = 0.0       # all-gathered over tp only under sequence parallelism (a whole mixer's input)
    ring: float = 0.0        # keys and values a ring passes to its neighbour, per step
    a2a: float = 0.0         # q, k, v and the output swapped all-to-all under Ulysses CP
    handoff: float = 0.0     # per sequence: linear attention's final state and last conv − 1 inputs, to the next cp rank
    ep: float = 0.0          # tokens dispatched to and combined from experts (2·k·h), each way
    whole: bool = False      # the mixer runs whole on every tp rank: its cp traffic is not divided by t
    window: int = 0          # a sliding-window layer's window: the ring passes only the chunks within it
    tp_calls: float = 0.0    # tp collectives per forward pass (each gather: n − 1 message steps)
    tp_sp_calls: float = 0.0  # those only under sequence parallelism (a whole mixer's input gather)
    a2a_calls: float = 0.0   # Ulysses all-to-alls per forward pass (q, k, v and the output of each attention)


def attention_widths(cfg: LayerConfig) -> tuple[float, float, float]:
    """Return (q, k, v) elements per token that the score matmuls read (what cp rings and all-to-alls move)."""
    if cfg.attn_kind == "mla":
        qk = (cfg.nope_dim or cfg.head_dim) + cfg.rope_dim
        return cfg.heads * qk, cfg.kv_heads * qk, cfg.kv_heads * cfg.head_dim
    # The value heads are value_dim wide where the model states it (MiMo-V2-Flash), else head_dim.
    return cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.kv_heads * (cfg.value_dim or cfg.head_dim)


def layer_comm_coeffs(cfg: LayerConfig, whole: frozenset[str] = frozenset()) -> CommCoeffs:
    """Return the communication coefficients of one layer priced with `cfg`.

    Each mixer accounts for two of the layer's gathers (its input gathered, its
    output reduced). When `whole` names the mixer role (its family layout
    replicates it over tp) every tp rank runs it whole: its output needs no
    reduction, and its input is gathered only from sequence-parallel shards.
    """
    ops = cfg.ops
    q, k, v = attention_widths(cfg)
    pairs = op_count(ops, OP.ATT_BMM) / 2
    gathers, mixer = op_count(ops, OP.GATHER), 0.0
    if MIXER_ROLES & whole:
        mixer = min(gathers, 2 * op_count(ops, OP.ATT_MM) / 4)
    return CommCoeffs(
        tp=(gathers - mixer) * cfg.hidden, tp_sp=mixer / 2 * cfg.hidden, ring=pairs * (k + v),
        a2a=pairs * (q + k + v + cfg.heads * cfg.head_dim), handoff=op_count(ops, OP.LINREC) * linear_handoff(cfg),
        # The routed experts' tokens cross the ep group at their width: latent_width behind latent projections
        # (hpdsl/torch/modules/moe.py projects before the experts dispatch), else hidden.
        ep=2 * cfg.top_k * (cfg.latent_width or cfg.hidden) if cfg.experts > 1 else 0.0, whole=mixer > 0,
        # A chunked layer's queries reach at most chunk − 1 keys back: its ring is a window's of the chunk.
        window=cfg.window or cfg.chunk,
        tp_calls=gathers - mixer, tp_sp_calls=mixer / 2, a2a_calls=4 * pairs)


def linear_handoff(cfg: LayerConfig) -> float:
    """Return the elements per sequence a Gated DeltaNet passes to the next cp rank: state and convolution tail.

    Each cp rank holds a contiguous chunk; the next one starts from this rank's
    final recurrent state (value heads × d_k × d_v) and convolves on from its
    last conv − 1 projected q, k, v inputs (hpdsl/torch/modules/deltanet.py).
    """
    state = cfg.value_heads * cfg.key_head_dim * cfg.value_head_dim
    conv_inputs = 2 * cfg.key_heads * cfg.key_head_dim + cfg.value_heads * cfg.value_head_dim
    return state + max(cfg.conv - 1, 0) * conv_inputs


def column_comm_coeffs(column: Column, columns: ModelColumns) -> CommCoeffs:
    """Return any column's coefficients: the embedding and output reduce once per pass."""
    h = columns.cost_model.model.hidden
    if column.role in ("embedding", "output"):
        return CommCoeffs(tp=h, tp_calls=1.0)
    assert column.config is not None
    layer = layer_comm_coeffs(column.config, column.whole)
    return attrs.evolve(layer, tp=layer.tp + h, tp_calls=layer.tp_calls + 1) if column.role == "mtp" else layer


@attrs.frozen(eq=False)
class LayerComm:
    """One column per micro-batch: bytes per axis and exposed seconds, without and for recompute."""

    tp: Val
    cp: Val
    ep: Val
    time: Val
    rec_tp: Val
    rec_cp: Val
    rec_ep: Val
    rec_time: Val


def layer_comm(c: CommCoeffs, x: Ctx, core_seconds: Val, rec_core_seconds: Val
               ) -> LayerComm:
    """Return one column's traffic per micro-batch; core_seconds hide the ring's transfers.

    A traffic a column's coefficients rule out is `zero` itself and left out of
    every sum (adding it would add +0.0): a column without tp, cp or ep traffic
    (the embedding, the output, a replicated mixer's parts) costs a few operations.
    """
    zero = xp.zeros_like(x.tokens)
    per_token = x.compute_bytes * x.tokens / x.tp
    tp = per_token * c.tp * (x.tp - 1) if c.tp else zero
    if c.tp_sp:
        tp = _plus(tp, xp.where(x.sp_shards > 1, per_token * c.tp_sp * (x.tp - 1), 0.0), zero)
    mixer = x.compute_bytes * x.tokens if c.whole else per_token  # a whole mixer swaps every head on each tp rank
    ring = xp.where(x.ring, mixer * c.ring * ring_steps(x, c.window), 0.0) if c.ring else zero
    a2a = xp.where(x.ring, 0.0, mixer * c.a2a * (x.cp - 1) / x.cp) if c.a2a else zero
    handoff = zero
    if c.handoff:  # once per sequence, whatever its length: to the next rank, its gradient back
        sequences = x.compute_bytes * x.micro_batch if c.whole else x.compute_bytes * x.micro_batch / x.tp
        handoff = xp.where(x.cp > 1, sequences * c.handoff, 0.0)
    cp_moved = _plus(a2a, handoff, zero)
    # Experts: all-to-all dispatch and combine over ep, then, with expert TP, an
    # all-gather of the routed tokens and a reduce-scatter of their outputs over etp.
    ep = x.compute_bytes * x.tokens / x.sp_shards * c.ep * ((x.ep - 1) / x.ep + (x.etp - 1)) if c.ep else zero
    full = x.recompute == 2
    # forward + backward: the backward repeats the gathers and all-to-alls, and a ring
    # passes keys and values again plus their gradients.
    moved = _seconds(((tp, x.bw_tp), (ep, x.bw_ep), (cp_moved, x.bw_cp)), zero)
    if x.latency_on:  # each collective's message steps at its tier's latency (a cluster's tiers)
        moved = _plus(moved, latency_seconds(c, x), zero)
    time = moved if moved is zero else 2 * moved
    rec_tp, rec_ep, rec_a2a = (v if v is zero else xp.where(full, v, 0.0) for v in (tp, ep, cp_moved))
    rec_time = _seconds(((rec_tp, x.bw_tp), (rec_ep, x.bw_ep), (rec_a2a, x.bw_cp)), zero)
    if x.latency_on:
        rec_time = _plus(rec_time, xp.where(full, latency_seconds(c, x), 0.0), zero)
    rec_ring = zero
    if c.ring:
        rec_ring = xp.where(x.recompute >= 1, ring, 0.0)
        ring_lat = xp.where(x.ring, ring_steps(x, c.window) * x.lat_cp, 0.0) if x.latency_on else 0.0
        time = time + xp.maximum(0.0, 3 * (ring / x.bw_cp + ring_lat) - core_seconds)
        rec_time = rec_time + xp.maximum(0.0, rec_ring / x.bw_cp + xp.where(x.recompute >= 1, ring_lat, 0.0)
                                         - rec_core_seconds)
    return LayerComm(_times(2, tp, zero), _plus(_times(3, ring, zero), _times(2, cp_moved, zero), zero),
                     _times(2, ep, zero), time, rec_tp, _plus(rec_ring, rec_a2a, zero), rec_ep, rec_time)


def latency_seconds(c: CommCoeffs, x: Ctx) -> Val:
    """Return the seconds one forward pass of a column waits on message steps: its tp, ep and Ulysses collectives.

    A ring all-gather or reduce-scatter of n devices takes n − 1 steps; an all-reduce (tp without
    sequence parallelism: two gathers) 2(n − 1) as a ring, 2·ceil(log2 n) as a tree; an all-to-all
    n − 1 (pairwise exchange). Each step waits the tier's latency.
    """
    per_gather = xp.where(x.tree_tp & (x.sp_shards == 1), ceil_log2(x.tp), x.tp - 1)
    out = (c.tp_calls * per_gather + c.tp_sp_calls * xp.where(x.sp_shards > 1, x.tp - 1, 0.0)) * x.lat_tp
    if c.ep:  # dispatch and combine over ep; the routed tokens' all-gather and reduce-scatter over etp
        out = out + 2 * (x.ep - 1 + x.etp - 1) * x.lat_ep
    if c.a2a:
        out = out + xp.where(x.ring, 0.0, c.a2a_calls * (x.cp - 1) * x.lat_cp)
    if c.handoff:
        out = out + xp.where(x.cp > 1, x.lat_cp, 0.0)
    return out


def ceil_log2(n: Val, bits: int = 24) -> Val:
    """Return ceil(log2 n) for 1 <= n <= 2^bits, in the operators floats, arrays and traces share."""
    out = n * 0.0
    for k in range(bits):
        out = out + xp.where(n > 2.0**k, 1.0, 0.0)
    return out


def _plus(a: Val, b: Val, zero: Val) -> Val:
    """Return a + b, where either may be the known `zero` (left out)."""
    return b if a is zero else a if b is zero else a + b


def _times(k: float, a: Val, zero: Val) -> Val:
    """Return k·a, or the known `zero` itself."""
    return a if a is zero else k * a


def _seconds(terms: tuple[tuple[Val, Val], ...], zero: Val) -> Val:
    """Return Σ bytes / bandwidth in order, the known-zero bytes left out (the known `zero` if all are)."""
    total = zero
    for moved, bandwidth in terms:
        if moved is not zero:
            total = moved / bandwidth if total is zero else total + moved / bandwidth
    return total


def ring_steps(x: Ctx, window: int) -> Val:
    """Return how many other ranks receive a rank's keys and values: cp − 1, or those a sliding window reaches.

    Under the load-balanced layout rank r holds chunks r and 2cp − 1 − r of
    s/(2cp) positions. A query sees keys at most w − 1 positions back, so m =
    ⌈(w − 1)·2cp / s⌉ chunks before each of its two: those of ranks r − m … r − 1
    and r + 1 … r + m, at most 2m others (docs/cost-model.md#sliding-window-attention).
    """
    if not window:
        return x.cp - 1
    reach = -((-(window - 1) * 2 * x.cp) // x.seq_len)  # the ceiling, in operators floats, arrays and traces share
    return xp.minimum(x.cp - 1, 2 * reach)


def pipeline_bytes(x: Ctx, hidden: int) -> Val:
    """Return the bytes a rank sends per micro-batch between stages (activations out, gradients back)."""
    # The device time model sends each tp rank's 1/tp of the boundary (Megatron's scatter-gather
    # p2p; the all-gather after it runs within the node), with or without sequence parallelism.
    shard = xp.where(x.device_model, x.tp, x.sp_shards) if x.device_model is not False else x.sp_shards
    boundary = x.compute_bytes * x.tokens * hidden / shard
    return xp.where(x.pp > 1, 2 * x.vpp * boundary, 0.0)


def data_parallel_factors(x: Ctx) -> tuple[Val, Val, Val, Val]:
    """Return bytes per (dense, expert) parameter the gradient reduction sends: once, per micro-batch.

    No sharding: all-reduce the gradients; os: reduce-scatter them and all-gather
    the updated parameters; os+grad: reduce-scatter every micro-batch; os+grad+params:
    also gather the parameters for every micro-batch's forward and backward.
    """
    z = x.zero
    # Deferred (deferred_grad_accumulation, several micro-batches): ZeRO-2/3 reduce-scatter once, after the last.
    once_g = xp.select([z == 0, z == 1], [2.0, 1.0], xp.where(x.deferred, 1.0, 0.0)) * x.grad_bytes
    once_p = xp.where((z == 1) | (z == 2), 1.0, 0.0) * x.param_bytes
    micro_g = xp.where((z >= 2) & xp.logical_not(x.deferred), 1.0, 0.0) * x.grad_bytes
    micro_p = xp.where(z == 3, 2.0, 0.0) * x.param_bytes
    dense_share = (x.dp * x.cp - 1) / (x.dp * x.cp)
    expert_share = (x.expert_dp - 1) / x.expert_dp
    return ((once_g + once_p) * dense_share, (once_g + once_p) * expert_share,
            (micro_g + micro_p) * dense_share, (micro_g + micro_p) * expert_share)
