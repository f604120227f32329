"""What transformers' modules save for the backward beyond fused kernels: the hf-sdpa and hf-eager terms.

The fused estimate (hpdsl/cost/formulas/memory.py) prices what Megatron/TransformerEngine
keep: flash attention, fused norms and a fused SwiGLU. transformers' modules run
the same maths op by op, and autograd keeps more (docs/cost-model.md#activations-per-implementation
names the node that holds each term):

- every RMSNorm upcasts its input to fp32 (kept by PowBackward and MulBackward),
  keeps the fp32 reciprocal root per row and the normalised copy `x̂` at compute
  width (MulBackward of `weight * x̂`), in fp32 for a (1 + w) norm (`norm_offset`); a LayerNorm keeps its input and the fp32
  mean and reciprocal deviation per row;
  a norm that scales its compute-width input by the root (`norm_keeps_input`,
  T5LayerNorm) keeps that input too (MulBackward of `x * rsqrt(...)`);
- every gated MLP keeps act(gate) (MulBackward of `act(gate) * up`), per routed
  token and per shared expert too; an activation whose backward reads its output
  (ReLU: ReluBackward keeps its result) keeps no copy of its input;
- a loss that does not upcast the logits (`loss_upcast` false, T5's) keeps the
  log-softmax at the compute width, not in fp32;
- the router keeps its fp32 probabilities, int64 top-k indices, fp32 top-k
  weights and their sum, and per routed token the int64 gather/scatter indices
  and the fp32 weight; an MLA model's router (DeepSeek-V3's) takes an fp32 copy
  of its input;
- FLA's chunked gated delta rule keeps the solved triangular A of each chunk
  (C per value head and token) and the gate's fp32 cumulative sum;
- SDPA on CPU (`hf-sdpa-cpu`) runs its math kernel where CPU flash cannot (MLA's
  unequal head sizes, a learnt position bias): it keeps q, k and v upcast to fp32
  and the fp32 softmax that A·V reads, in place of flash's row statistics;
- under SDPA an output gate multiplies a contiguous copy of the attention output
  (Qwen3-Next's), which the kernel keeps beside it;
- eager attention keeps `repeat_kv`'s expanded K and V (all query heads wide)
  (its contiguous o_proj input is the SDPA output's stand-in); its fp32 softmax and the compute-width copy
  are the score terms priced with flash off and a 4-byte softmax (a layer with a
  relative-position score bias keeps one softmax at compute width).

Every term is derived from the layer's op counts and its config (norm kind,
MLP form, heads, MoE and MLA blocks), never from a model's name.
"""

from __future__ import annotations

import attrs

from hpdsl.bound.bind import LayerConfig
from hpdsl.ir.nodes import RunFacts
from hpdsl.model import ops as OP
from hpdsl.model.ops import count as op_count

FP32 = 4
"""transformers' RMSNorm and router statistics are fp32."""
INDEX = 8
"""Routing indices are int64."""
ROUTED_BOOKKEEPING = 3 * INDEX + FP32
"""Per routed token: the sort and scatter indices (int64, three tensors) and its fp32 routing weight."""
FLA_CHUNK = 64
"""Tokens per chunk of FLA's gated delta rule (hpdsl/cost/formulas/flops.py prices the same LINEAR_CHUNK)."""
LAYERNORM_STATS = 2 * FP32
"""nn.LayerNorm keeps an fp32 mean and reciprocal deviation per row."""
OUTPUT_SAVING = frozenset({"relu"})
"""Activations whose backward keeps their output, not their input (ReluBackward0 saves its result)."""


@attrs.frozen
class HfCoeffs:
    """What transformers' modules save beyond the fused terms, per token.

    Added under --impl hf-sdpa and hf-eager; eager_t_c under hf-eager only.
    Negative values replace a fused term by transformers' own (the router's).
    """

    sp_c: float = 0.0       # elements at compute bytes, divided by sp (RMSNorm's normalised copy)
    sp_b: float = 0.0       # bytes, divided by sp (fp32 norm inputs, reciprocal roots, routing)
    t_c: float = 0.0        # elements at compute bytes, divided by t (act(gate))
    routed_b: float = 0.0   # bytes per token of routing bookkeeping, times etp, divided by t
    mix_c: float = 0.0      # the mixer's elements at compute bytes (QK-norm copies, FLA's A), / t unless whole
    mix_b: float = 0.0      # the mixer's bytes (QK-norm fp32 inputs and roots, FLA's gate), / t unless whole
    eager_t_c: float = 0.0  # eager only: repeat_kv's expanded K and V beyond the kv heads (mixer)
    eager_softmax: int = FP32  # eager only: bytes per softmax element (0: the compute width)
    sdpa_t_c: float = 0.0   # hf-sdpa only: the gated attention output's contiguous copy (mixer)
    cpu_w: float = 0.0      # hf-sdpa-cpu: q/k/v elements the math kernel keeps in fp32 (mixer)
    cpu_heads: float = 0.0  # hf-sdpa-cpu: heads whose fp32 softmax the math kernel keeps (mixer)
    logit_v: float = 0.0    # logits the loss keeps at compute bytes, not fp32 (loss_upcast false), / loss_t
    whole: bool = False     # the mixer is replicated over tp: its terms are not divided by t


def norm_terms(cfg: LayerConfig, run: RunFacts, width: float, rows: float = 1.0) -> tuple[float, float]:
    """Return (compute elements, bytes) transformers keeps beyond the fused `norm_bytes`·width for one norm.

    `rows` norms of `width` elements each per token (a per-head QK-norm has one
    row per head).
    """
    return output_norm_terms(cfg.norm, run, width, rows, offset=cfg.norm_offset)


def output_norm_terms(norm: str | None, run: RunFacts, width: float, rows: float = 1.0, *,
                      offset: bool = False) -> tuple[float, float]:
    """Return norm_terms for a norm of kind `norm` ("rmsnorm" or "layernorm"), (1 + w) when `offset`."""
    c, b = _norm_terms(norm, run, width, rows, offset)
    # T5LayerNorm's `x * rsqrt(...)` multiplies the compute-width input, which its
    # MulBackward0 keeps beside the fp32 copy PowBackward0 keeps.
    return c + (width if run.norm_keeps_input and norm != "layernorm" else 0.0), b


def _norm_terms(norm: str | None, run: RunFacts, width: float, rows: float, offset: bool) -> tuple[float, float]:
    if offset:  # x̂·(1 + w) runs in fp32: x̂ is kept at 4 bytes, not the compute width
        return 0.0, (2 * FP32 - run.norm_bytes) * width + rows * FP32
    if norm == "layernorm":  # native_layer_norm keeps its input (compute width) and two row statistics
        return width, rows * LAYERNORM_STATS - run.norm_bytes * width
    return width, (FP32 - run.norm_bytes) * width + rows * FP32


def hf_coeffs(cfg: LayerConfig, run: RunFacts) -> HfCoeffs:
    """Return the hf-sdpa / hf-eager terms of one layer priced with `cfg`."""
    ops, h = cfg.ops, cfg.hidden
    att = op_count(ops, OP.ATT_MM) / 4
    norms = op_count(ops, OP.NORM)
    sp_c, sp_b = (norms * v for v in norm_terms(cfg, run, h))
    t_c = mix_c = mix_b = 0.0
    if cfg.attn_kind == "mla":
        # The latent norms: the fused term kept the whole kv down-projection output
        # (rope part included) at norm_bytes; transformers upcasts only the latents.
        latents = cfg.q_lora_rank + cfg.kv_lora_rank
        rows = 2 if cfg.q_lora_rank else 1
        c, b = norm_terms(cfg, run, latents, rows)
        sp_c, sp_b = sp_c + att * c, sp_b + att * (b - run.norm_bytes * cfg.rope_dim)
    if cfg.qk_norm and att > 0:  # a feed-forward-only layer has no q, k to normalise
        heads = cfg.heads + cfg.kv_heads
        c, b = norm_terms(cfg, run, heads * cfg.head_dim, heads)
        mix_c, mix_b = mix_c + c, mix_b + b
    if op_count(ops, OP.LINREC):
        # FLA's chunked gated delta rule keeps the chunk's solved triangular A
        # (LINEAR_CHUNK per value head and token) and the gate's fp32 cumulative sum.
        linrec = op_count(ops, OP.LINREC)
        mix_c += linrec * FLA_CHUNK * cfg.value_heads
        mix_b += linrec * FP32 * cfg.value_heads
    n_ff, acts = op_count(ops, OP.FF_MM), op_count(ops, OP.FF_ACT)
    gate = acts if n_ff % 2 else 0  # a gated MLP's product keeps act(gate) beside gate and up
    if cfg.activation in OUTPUT_SAVING:
        gate -= acts  # the activation keeps its output: its input (the fused ffAct term) is not kept
    routed_b = 0.0
    if cfg.experts <= 1:
        t_c += gate * cfg.ffn_width
    else:
        t_c += gate * (cfg.top_k * cfg.ffn_width + cfg.shared_experts * cfg.shared_width)
        e, k = cfg.experts, cfg.top_k
        # The fused router's logits, probabilities and top-k weights (compute width)
        # become fp32 probabilities, int64 indices, fp32 weights and their fp32 sum.
        sp_c -= 2 * e + k
        sp_b += FP32 * e + (INDEX + FP32) * k + FP32
        if cfg.attn_kind == "mla":
            sp_b += FP32 * h  # DeepSeek-V3's router projects an fp32 copy of its input
        routed_b = k * ROUTED_BOOKKEEPING
    eager = 0.0
    if op_count(ops, OP.ATT_BMM) and cfg.attn_kind != "linear":
        # The score matmuls read K and V expanded to every query head; the contiguous
        # o_proj input replaces the SDPA output the fused terms count.
        k_w, v_w = _widths(cfg)
        eager = op_count(ops, OP.ATT_BMM) / 2 * (cfg.heads - cfg.kv_heads) * (k_w + v_w)
    # transformers' shared eager attention takes the softmax in fp32 and copies it for A·V;
    # a module that adds a learnt relative-position bias to the scores (T5's) keeps it
    # at the compute width, once.
    softmax = 0 if cfg.position_buckets else FP32
    # An output gate multiplies a contiguous copy of the SDPA output (which the kernel
    # keeps too); under eager that copy is the only one.
    sdpa = att * cfg.heads * cfg.head_dim if cfg.output_gate and cfg.attn_kind != "linear" else 0.0
    math = _cpu_math_attentions(cfg) if op_count(ops, OP.ATT_BMM) and cfg.attn_kind != "linear" else 0
    k_w, v_w = _widths(cfg)
    return HfCoeffs(sp_c=sp_c, sp_b=sp_b, t_c=t_c, routed_b=routed_b, mix_c=mix_c, mix_b=mix_b,
                    eager_t_c=eager, eager_softmax=softmax, sdpa_t_c=sdpa,
                    cpu_w=math * (cfg.heads * k_w + cfg.kv_heads * (k_w + v_w)), cpu_heads=math * cfg.heads)


def _cpu_math_attentions(cfg: LayerConfig) -> float:
    """Return how many of the layer's SDPA calls run the math kernel on CPU (none on a GPU).

    CPU flash needs equal query/key and value head sizes (MLA's differ: every
    attention) and takes no float mask that needs a gradient (a learnt
    relative-position bias: the self-attention only; T5's cross-attention has
    none). On a GPU the memory-efficient kernel takes both, so hf-sdpa is fused.
    """
    k_w, v_w = _widths(cfg)
    if k_w != v_w:
        return op_count(cfg.ops, OP.ATT_MM) / 4
    return 1.0 if cfg.position_buckets else 0.0



def _widths(cfg: LayerConfig) -> tuple[float, float]:
    """Return the key and value widths per head."""
    if cfg.attn_kind == "mla":
        return (cfg.nope_dim or cfg.head_dim) + cfg.rope_dim, cfg.head_dim
    return cfg.head_dim, cfg.head_dim
