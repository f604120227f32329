"""Op counts of a layer kind into bytes per device: saved activations and parameter-sized state.

Activations (bytes one rank saves for the backward of one micro-batch) are per
token, split by what divides them: sp (hidden-width tensors outside the
tensor-parallel regions: norm inputs, the QKV and FFN inputs, dropout masks),
t (head- or width-split tensors), t with a factor of the key length (the
score tensors when attention is not flash), and etp/t (tokens routed to
experts). The layer's input, its norms' inputs and dropout masks are the op
counts' here (docs/cost-model.md lists the terms); for a GPT-style layer, with
the families' terms, they give Korthikanti et al.'s 34·s·b·h + 5·a·s²·b and
its tensor-parallel, sequence-parallel and selective-recompute variants exactly.

What a mixer keeps beside the layer's input (an attention's q, k, v, output,
output gate, score tensors and flash statistics, MLA's latents, a scan's inputs)
and what a feed-forward keeps (an MLP's input and widths, a MoE's router scores,
routed inputs, expert outputs, latent projection and shared experts) is declared
with its family: the `saved` terms of its `cost { }` block (families/attention.hpf,
mla.hpf, mamba.hpf, mlp.hpf, grouped_experts.hpf, router.hpf, ...; docs/language.md
"Saved activations"), which ride with the column (hpdsl/cost/facts/columns.py
`Column.saved`, `Column.ffn_saved`) and land in these coefficients in
hpdsl/cost/formulas/saved.py; none of those modules' formulas is written here.

Parameters come from hpdsl.cost.facts.params (exact counts); what each rank holds
of them is read from the slots' layouts in hpdsl/cost/formulas/param_shards.py.
"""

from __future__ import annotations

import attrs

from hpdsl.bound.bind import LayerConfig
from hpdsl.cost.facts.backend import beside_norms, gathered_moves
from hpdsl.cost.facts.columns import Column, ModelColumns
from hpdsl.cost.facts.cost_terms import DeclaredTerm, feed_forward_part, mixer_part, standard_saved
from hpdsl.cost.facts.impl_terms import FP32, INDEX, HfCoeffs, hf_coeffs, output_norm_terms
from hpdsl.cost.facts.roles import MIXER_ROLES
from hpdsl.cost.formulas import xp
from hpdsl.cost.formulas.context import Ctx, scalar_context
from hpdsl.cost.formulas.handoff import carried, carried_per_token
from hpdsl.cost.formulas.saved import saved_coeffs
from hpdsl.cost.formulas.xp import Val
from hpdsl.ir.nodes import ModelIR, RunFacts
from hpdsl.model import ops as OP
from hpdsl.model.ops import count as op_count
from hpdsl.model.strategy import Strategy

LOGIT_BYTES = 4
"""The cross-entropy keeps the logits' softmax in fp32."""
FLASH_STAT_BYTES = 4
"""Flash attention keeps one fp32 log-sum-exp per query row and head (the attention families declare it)."""


@attrs.frozen
class ActCoeffs:
    """Saved activations of one column per token, by byte class and divisor."""

    sp_c: float = 0.0      # elements at compute bytes, divided by sp
    sp_b: float = 0.0      # bytes (norm inputs, dropout masks), divided by sp
    t_c: float = 0.0       # elements at compute bytes, divided by t
    t_b: float = 0.0       # bytes, divided by t
    routed_in: float = 0.0  # elements at compute bytes, times etp, divided by t
    sc_sm: float = 0.0     # per key: score elements at softmax bytes, divided by t
    sc_c: float = 0.0      # per key: score elements at compute bytes, divided by t
    sc_b: float = 0.0      # per key: bytes (score dropout masks), divided by t
    flash_b: float = 0.0   # bytes under flash attention (row statistics), divided by t
    full_c: float = 0.0    # elements a fully recomputed layer keeps (its input), divided by sp
    keep_sp_c: float = 0.0  # never recomputed (output-layer part): elements at compute bytes, / sp
    keep_sp_b: float = 0.0  # never recomputed: bytes, / sp
    logit_b: float = 0.0   # never recomputed: logit bytes, divided by t with loss_parallel
    whole_c: float = 0.0   # elements at compute bytes of a tp-replicated mixer, not divided by t
    whole_b: float = 0.0   # bytes of a tp-replicated mixer, not divided by t
    scores_whole: bool = False  # the score terms belong to a tp-replicated mixer: not divided by t
    sp_copy_c: float = 0.0  # a gathered copy of the chunk kept beside it, only when sp divides the chunk
    keep_c: float = 0.0    # never recomputed: elements at compute bytes, whole on every tp rank
    keep_b: float = 0.0    # never recomputed: bytes whole on every tp rank (the int64 token ids, labels)
    cp_kv_c: float = 0.0   # keys and values kept once more per further cp rank (gathered), divided by t
    cp_masks: float = 0.0  # [s/cp, s] attention masks kept under cp, at compute bytes, whole on every tp rank
    cp_carry: tuple[float, float] = (0.0, 0.0)  # per sequence under cp: hand-off elements, state bytes
    hf: HfCoeffs | None = None  # what transformers' modules keep beyond the fused kernels'


def layer_act_coeffs(cfg: LayerConfig, run: RunFacts, *, whole: frozenset[str] = frozenset(),
                     saved: tuple[DeclaredTerm, ...] | None = None,
                     ffn_saved: tuple[DeclaredTerm, ...] | None = None) -> ActCoeffs:
    """Return the activation coefficients of one layer priced with `cfg` and its families' `saved` terms.

    What the mixer keeps (an attention's q, k, v, output, scores and statistics, MLA's latents, a
    scan's inputs) and what the feed-forward keeps (an MLP's input and widths, a MoE's router scores,
    routed inputs, expert outputs and shared experts) are its slots' families' saved terms
    (hpdsl/cost/formulas/saved.py); the layer's input, its norms' inputs and dropout masks are priced
    here. When `whole` names the layer's mixer role (its family layout replicates it over tp,
    hpdsl/cost/facts/replication.py), the mixer's head-split tensors and its scores are kept whole
    on every tp rank instead of divided by t. A saved term is split as the mixer's heads are; one
    marked `replicate` is whole on every tp rank. `saved` holds the mixer's terms, `ffn_saved` the
    feed-forward's (Column.saved, Column.ffn_saved); None: the shipped families' terms
    (hpdsl/cost/facts/cost_terms.py `standard_saved`), for a layer priced without its registry.
    """
    if saved is None or ffn_saved is None:
        standard = standard_saved(cfg)
        saved = mixer_part(standard) if saved is None else saved
        ffn_saved = feed_forward_part(standard) if ffn_saved is None else ffn_saved
    ops, h = cfg.ops, cfg.hidden
    b_n, b_d = float(run.norm_bytes), float(run.dropout_bytes)
    att = op_count(ops, OP.ATT_MM) / 4
    own, ffn = saved_coeffs(saved, run), saved_coeffs(ffn_saved, run)
    # The mixer's input (its projections read the norm's output), h wide, split by sequence.
    sp_c = att * h - _shared_input(cfg, att) + own.sp_c + ffn.sp_c
    # The norms the op vector counts, and those a MoE block beside its MLP adds (hpdsl/bound/slots.py beside_slots:
    # mlp_post_norm, moe_norm, moe_post_norm), each keeping its input.
    norms = op_count(ops, OP.NORM) + beside_norms(cfg)
    sp_b = norms * b_n * h + op_count(ops, OP.DROPOUT) * b_d * h + own.sp_b + ffn.sp_b
    coeffs = ActCoeffs(
        sp_c=sp_c, sp_b=sp_b, t_c=own.t_c + ffn.t_c, t_b=own.t_b + ffn.t_b, routed_in=own.routed_c + ffn.routed_c,
        sc_sm=own.sc_sm, sc_c=own.sc_c, sc_b=own.sc_b, flash_b=own.flash_b, whole_c=own.whole_c + ffn.whole_c,
        whole_b=own.whole_b + ffn.whole_b, full_c=h, hf=hf_coeffs(cfg, run))
    if MIXER_ROLES & whole:
        # The head-split terms of the mixer's slots are kept whole on every tp rank; the feed-forward's stay split.
        hf = attrs.evolve(coeffs.hf, whole=True) if coeffs.hf else None
        coeffs = attrs.evolve(coeffs, t_c=ffn.t_c, t_b=ffn.t_b, whole_c=coeffs.whole_c + own.t_c,
                              whole_b=coeffs.whole_b + own.t_b, scores_whole=True, hf=hf)
    return _moved(cfg, run, coeffs, ffn.sp_c, ffn_saved)


def _moved(cfg: LayerConfig, run: RunFacts, coeffs: ActCoeffs, ffn_sp: float,
           ffn_saved: tuple[DeclaredTerm, ...]) -> ActCoeffs:
    """Return `coeffs` with what the run's backend keeps whole moved out of the split buckets (gathered_moves).

    A MoE's sequence-split terms (router, combine, latent projection: `ffn_sp`) and its routed experts'
    terms are what a backend that does not split the routed tokens keeps whole (hpdsl/cost/facts/backend.py).
    """
    moe = cfg.experts > 1
    routed = saved_coeffs((t for t in ffn_saved if t.role == "experts"), run).t_c if moe else 0.0
    moves = gathered_moves(cfg, run, ffn_sp if moe else 0.0, routed, coeffs.routed_in)
    return attrs.evolve(coeffs, sp_c=coeffs.sp_c - moves.sp_c, sp_b=coeffs.sp_b - moves.sp_b,
                        t_c=coeffs.t_c - moves.t_c, routed_in=coeffs.routed_in - moves.routed_in,
                        whole_c=coeffs.whole_c + moves.sp_c + moves.t_c + moves.routed_in,
                        whole_b=coeffs.whole_b + moves.sp_b, sp_copy_c=moves.sp_copy_c, cp_kv_c=moves.cp_kv_c,
                        cp_masks=moves.cp_masks, cp_carry=carried(cfg))


def _shared_input(cfg: LayerConfig, att: float) -> float:
    """Return the elements a parallel block (wiring parallel: GPT-J, Phi) saves once, not twice, per token.

    Its mixer and feed-forward read one norm's output: the tensor the q, k, v
    projections keep is the one the feed-forward's first matrices keep
    (hpdsl/bound/wiring.py).
    """
    shared = cfg.wiring == "parallel" and att == 1 and op_count(cfg.ops, OP.FF_MM) > 0 and cfg.experts <= 1
    return float(cfg.hidden) if shared else 0.0


def output_act_coeffs(hidden: int, vocab: int, run: RunFacts, norm: str = "rmsnorm", offset: bool = False, *,
                      final_norm: bool = True, head_width: int | None = None, project_out: bool = False
                      ) -> ActCoeffs:
    """Return the final norm's input, the output projection's input, the fp32 logits and the int64 labels.

    transformers also keeps the final norm's terms (hpdsl/cost/facts/impl_terms.py). The model's outer
    wiring (hpdsl/bound/slots.py end_slots) may drop the final norm (no_final_norm) and put project_out
    before the head, which then reads an embed_width-wide input (`head_width`; project_out keeps its own).
    """
    c, b = output_norm_terms(norm, run, hidden, offset=offset) if final_norm else (0.0, 0.0)
    # A loss on the compute-width logits (T5's) keeps its log-softmax at that width.
    hf = HfCoeffs(sp_c=c, sp_b=b, logit_v=0.0 if run.loss_upcast else vocab)
    # The head's input is the final norm's output, gathered first when the backend gathers before a tp region.
    kept = (head_width or hidden) + (hidden if project_out else 0)
    split, whole = (0.0, kept) if run.gathered_tp_input else (kept, 0.0)
    return ActCoeffs(keep_sp_c=split, keep_c=whole, keep_sp_b=run.norm_bytes * hidden if final_norm else 0.0,
                     logit_b=LOGIT_BYTES * vocab, keep_b=INDEX, hf=hf)  # the loss's backward reads the labels


def embedding_act_coeffs(model: ModelIR, run: RunFacts) -> ActCoeffs:
    """Return the embedding column's saved tensors: the dropout mask, the token ids, and the outer wiring's inputs.

    project_in keeps its embed_width-wide input and an embedding norm (embed_norm) its hidden-wide one,
    as the final norm keeps its own (output_act_coeffs).
    """
    projected = model.embed_width is not None and model.embed_width != model.hidden
    kept = (model.embed_width if projected else 0) + (model.hidden if model.embed_norm else 0)
    norm = run.norm_bytes * model.hidden if model.embed_norm else 0.0
    return ActCoeffs(keep_sp_c=float(kept), keep_sp_b=run.dropout_bytes * model.hidden + norm, keep_b=INDEX)


def _output(model: ModelIR, run: RunFacts) -> ActCoeffs:
    projected = model.embed_width is not None and model.embed_width != model.hidden
    return output_act_coeffs(model.hidden, model.vocab, run, model.norm, model.norm_offset,
                             final_norm=not model.no_final_norm,
                             head_width=model.embed_width if projected else None, project_out=projected)


def column_act_coeffs(column: Column, columns: ModelColumns) -> ActCoeffs:
    """Return the activation coefficients of any column."""
    run = columns.cost_model.profile.run
    model = columns.cost_model.model
    if column.role == "embedding":
        # The embedding dropout's mask and the int64 token ids the lookup's backward reads.
        return embedding_act_coeffs(model, run)
    if column.role == "output":
        return _output(model, run)
    assert column.config is not None
    layer = layer_act_coeffs(column.config, run, whole=column.whole, saved=column.saved, ffn_saved=column.ffn_saved)
    if column.role == "layer":
        return layer
    h = model.hidden
    out = _output(model, run)
    # MTP: two input norms, the 2h-wide projection input (gathered before the column-parallel projection when
    # the backend gathers, `gathered_tp_input`: whole on every tp rank), then its own output head (its input
    # split or whole as the output column's).
    gathered = 2.0 * h if run.gathered_tp_input else 0.0
    return attrs.evolve(layer, sp_c=layer.sp_c + 2 * h - gathered, whole_c=layer.whole_c + gathered,
                        sp_b=layer.sp_b + 2 * run.norm_bytes * h, full_c=2 * h, keep_sp_c=out.keep_sp_c,
                        keep_c=out.keep_c, keep_sp_b=out.keep_sp_b, logit_b=out.logit_b, keep_b=out.keep_b)


# --------------------------------------------------------------------------
# One column over a grid (arrays) or for one strategy (floats): hpdsl/cost/formulas/xp.py
# --------------------------------------------------------------------------


def activation(c: ActCoeffs, x: Ctx) -> tuple[Val, Val, Val]:
    """Return one layer's saved bytes per micro-batch: (no recompute, selective, full)."""
    zero = xp.zeros_like(x.tokens)
    keep = zero
    if c.keep_sp_c or c.keep_sp_b:
        keep = keep + (x.compute_bytes * c.keep_sp_c + c.keep_sp_b) / x.sp_shards
    if c.keep_c or c.keep_b:
        keep = keep + x.compute_bytes * c.keep_c + c.keep_b
    if c.logit_b:
        keep = keep + c.logit_b / x.loss_shards
    body = keep
    if c.sp_c or c.sp_b:
        body = body + (x.compute_bytes * c.sp_c + c.sp_b) / x.sp_shards
    if c.t_c or c.t_b or c.routed_in:
        wide = c.t_c + x.etp * c.routed_in if c.routed_in else c.t_c
        body = body + (x.compute_bytes * wide + c.t_b) / x.tp
    if c.whole_c or c.whole_b:
        body = body + x.compute_bytes * c.whole_c + c.whole_b
    if c.sp_copy_c:
        body = body + xp.where(x.sp_shards > 1, x.compute_bytes * c.sp_copy_c, 0.0)
    if c.cp_kv_c:
        kv = x.compute_bytes * c.cp_kv_c * (x.cp - 1)
        body = body + (kv if c.scores_whole else kv / x.tp) + xp.where(x.cp > 1, x.compute_bytes * c.cp_masks * x.seq_len, 0.0)
    if c.cp_carry[0] or c.cp_carry[1]:
        body = body + carried_per_token(*c.cp_carry, c.scores_whole, x)
    if c.hf is not None and x.any_hf:
        body = body + hf_extra(c.hf, x)
    selective = x.tokens * body
    core = zero  # what the core attention keeps beyond q, k, v, the mask and its output: selective recomputes it
    if c.hf is not None and c.hf.cpu_heads:
        # SDPA's CPU math kernel (hpdsl train on CPU, hf-sdpa-cpu), fused estimate or transformers'.
        math = cpu_math(c.hf, x)
        core = xp.where(x.cpu & x.flash, math if c.hf.whole else math / x.tp, 0.0)
    if c.sc_sm or c.sc_c or c.sc_b or c.flash_b:
        # The score tensor A·V reads is a copy of the softmax output only if a cast or
        # the attention dropout makes one; otherwise it is the softmax output itself.
        b_sm = xp.where(x.eager, c.hf.eager_softmax or x.compute_bytes, x.softmax_bytes) if c.hf and x.any_hf else x.softmax_bytes
        copied = (b_sm != x.compute_bytes) | (x.dropout_bytes > 0)
        scores = xp.where(x.flash, c.flash_b,
                          x.seq_len * (b_sm * c.sc_sm + xp.where(copied, x.compute_bytes * c.sc_c, 0.0) + c.sc_b))
        none = x.tokens * (body + core + (scores if c.scores_whole else scores / x.tp))
    else:
        none = x.tokens * (body + core)
    full = x.tokens * (x.compute_bytes * c.full_c / x.sp_shards + keep) if c.full_c else none
    return none, selective, full


def hf_extra(c: HfCoeffs, x: Ctx) -> Val:
    """Return what transformers' modules keep per token beyond the fused terms (0 under --impl fused)."""
    extra = (x.compute_bytes * c.sp_c + c.sp_b) / x.sp_shards + (x.compute_bytes * c.t_c + x.etp * c.routed_b) / x.tp
    mixer = x.compute_bytes * (c.mix_c + xp.where(x.eager, c.eager_t_c, c.sdpa_t_c)) + c.mix_b
    extra = extra + (mixer if c.whole else mixer / x.tp)  # a replicated mixer is whole on every rank
    if c.logit_v:
        extra = extra + (x.compute_bytes - LOGIT_BYTES) * c.logit_v / x.loss_shards
    return xp.where(x.hf, extra, 0.0)


def cpu_math(c: HfCoeffs, x: Ctx) -> Val:
    """Return what CPU SDPA's math kernel keeps per token beyond flash: fp32 q/k/v and softmax, less the statistics."""
    return (FP32 - x.compute_bytes) * c.cpu_w + c.cpu_heads * (x.seq_len * FP32 - FLASH_STAT_BYTES)


def layer_activation_bytes(cfg: LayerConfig, run: RunFacts, strategy: Strategy,
                           saved: tuple[DeclaredTerm, ...] | None = None,
                           ffn_saved: tuple[DeclaredTerm, ...] | None = None) -> tuple[float, float, float]:
    """Return the bytes one layer priced with `cfg` saves per micro-batch under `strategy`: (none, selective, full).

    The same expressions the grid pricing runs, for one strategy: what one rank
    keeps for the backward of one layer without recompute, under selective and
    under full recompute. `saved` and `ffn_saved` as layer_act_coeffs takes them.
    """
    x = scalar_context(strategy, run)
    none, selective, full = activation(layer_act_coeffs(cfg, run, saved=saved, ffn_saved=ffn_saved), x)
    return float(none), float(selective), float(full)


def recomputed_activation(c: ActCoeffs, x: Ctx) -> tuple[Val, Val]:
    """Return (kept when not recomputed, kept under the strategy's recompute) per micro-batch."""
    none, selective, full = activation(c, x)
    return none, xp.where(x.recompute == 2, full, xp.where(x.recompute == 1, selective, none))
