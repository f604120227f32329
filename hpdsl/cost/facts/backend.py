"""What hpdsl's torch backend does, as the run facts the estimator reads, and the saved terms they move.

`hpdsl train` prices the strategy it runs with `backend_facts(profile's facts,
strategy)`: the estimate then describes PyTorch's own engine as
hpdsl/torch/parallelize.py and hpdsl/torch/sequence.py apply it
(docs/cost-model.md#what-hpdsl-train-runs):

- gradients are `.grad` tensors held from the backward to the optimizer step
  (`grad_accumulation`); under pp, torch.distributed.pipelining runs every
  micro-batch's backward without FSDP2's gradient sync and reduces once, after the
  last (`deferred_grad_accumulation`); without pp `train` does so when the
  profile states `deferred_grad_accumulation`, else it reduce-scatters every
  micro-batch's gradients (hpdsl/torch/train.py `accumulate`); either way each
  micro-batch after the first adds its gradients into the held ones, an in-place
  sum per parameter (`fused_grad_accumulation` false: autograd's AccumulateGrad, or
  FSDP2 into its sharded gradients), where Megatron's weight-gradient matmuls add
  into them;
- under tp the loss runs on vocabulary-split logits (`loss_parallel`);
- under sequence parallelism torch's `PrepareModuleInput` gathers the sequence
  before a mixer, a dense feed-forward, a tp-split shared expert and the head, so
  their first linears keep the gathered input (`gathered_tp_input`), where
  Megatron's sequence-parallel linears keep their chunk and gather again in the
  backward;
- a MoE routes each tp rank's own chunk only under ZeRO-3 (hpdsl/torch/sequence.py
  `_local_moe`); otherwise every tp rank routes the whole sequence
  (`routed_tokens_split` false);
- under cp, attention all-gathers the keys and values over the cp ranks
  (hpdsl/torch/modules/attention.py `RingAttention`) and SDPA keeps them and the
  [s/cp, s] mask that offsets the causal rows (`cp_gathered_kv`);
- on CPU, SDPA runs its math kernel where CPU flash cannot (`cpu_attention`:
  hpdsl/cost/facts/impl_terms.py `_cpu_math_attentions` says which attentions);
  on CUDA it picks its flash kernel, which keeps no scores;
- per precision, what the backend keeps per parameter (`KEPT`): at bf16-mixed
  FSDP2's MixedPrecisionPolicy keeps the fp32 shard as both the weight and the
  copy the optimizer updates (no separate master: `main_param_bytes` 0, and the
  strategy priced with `param_bytes` 4, `backend_strategy`), reduces and keeps
  fp32 gradients, and casts a transient bf16 copy for each forward
  (docs/trainer.md, "What is measured").

`gathered_moves` derives the moved terms from a layer's op counts and config,
never from a model's name.
"""

from __future__ import annotations

import attrs

from hpdsl.bound.bind import CostModel, LayerConfig
from hpdsl.bound.slots import BESIDE_PATHS
from hpdsl.ir.nodes import RunFacts, evolve
from hpdsl.model import ops as OP
from hpdsl.model.ops import count as op_count
from hpdsl.model.strategy import Strategy

ZERO3 = "os+grad+params"
"""The ZeRO level under which the backend's MoE routes each tp rank's chunk (FSDP2 sums its experts over tp)."""


DEVICES = ("cpu", "cuda")
"""Where the backend runs: gloo on the CPU, NCCL on CUDA GPUs."""


@attrs.frozen
class Kept:
    """Bytes per parameter the backend keeps under a precision: the weight the optimizer updates, a master copy."""

    param: int
    master: int


KEPT: dict[str, Kept] = {"fp32": Kept(param=4, master=0), "bf16-mixed": Kept(param=4, master=0)}
"""The precisions the backend trains and what each keeps (bf16-mixed: FSDP2's fp32 shard is weight and master)."""


def backend_facts(run: RunFacts, strategy: Strategy, device: str = "cpu") -> RunFacts:
    """Return the profile's run facts with what hpdsl's torch backend does on `device` under `strategy`."""
    deferred = strategy.pp > 1 or run.deferred_grad_accumulation
    facts = evolve(run, grad_accumulation=True, deferred_grad_accumulation=deferred, fused_grad_accumulation=False,
                   loss_parallel=True,
                   gathered_tp_input=True, routed_tokens_split=strategy.zero == ZERO3, cp_gathered_kv=True,
                   cpu_attention=device != "cuda")
    kept = KEPT.get(strategy.precision)
    return facts if kept is None else evolve(facts, main_param_bytes=kept.master)


def as_trained(cost_model: CostModel, strategy: Strategy, device: str = "cpu") -> tuple[CostModel, Strategy]:
    """Return the model and strategy as `hpdsl train --device DEVICE` prices its run: the backend's facts and widths."""
    run = backend_facts(cost_model.profile.run, strategy, device)
    return attrs.evolve(cost_model, profile=attrs.evolve(cost_model.profile, run=run)), backend_strategy(strategy)


def backend_strategy(strategy: Strategy) -> Strategy:
    """Return `strategy` as the estimator prices the backend's run of it: the weight width the backend keeps."""
    kept = KEPT.get(strategy.precision)
    return strategy if kept is None else strategy.with_(param_bytes=kept.param)


@attrs.frozen
class Moves:
    """Per-token terms a backend keeps whole on every tp rank instead of divided by sp or t."""

    sp_c: float = 0.0     # compute elements taken out of the sp-divided terms
    sp_b: float = 0.0     # bytes taken out of the sp-divided terms
    t_c: float = 0.0      # compute elements taken out of the t-divided terms (routed tokens)
    routed_in: float = 0.0  # the routed tokens' inputs taken out of the etp/t-divided term
    sp_copy_c: float = 0.0  # a gathered copy kept beside the chunk (only when sp divides the chunk)
    cp_kv_c: float = 0.0  # key and value elements per token kept once more per further cp rank (divided by t)
    cp_masks: float = 0.0  # attention masks kept, one [s/cp, s] per attention (compute bytes per key)


def beside_norms(cfg: LayerConfig) -> int:
    """Return the norms a MoE block beside its MLP adds to a layer (mlp_post_norm, moe_norm, moe_post_norm), else 0."""
    return len(BESIDE_PATHS) - 1 if cfg.beside_width else 0


def gathered_moves(cfg: LayerConfig, run: RunFacts, router: float, routed_w: float, routed_in: float) -> Moves:
    """Return what `run`'s backend keeps whole of a layer priced with `cfg`.

    `router` is the MoE's sp-divided router and combine elements, `routed_w` and
    `routed_in` its routed experts' width and input terms (hpdsl/cost/formulas/memory.py).
    """
    if not run.gathered_tp_input and run.routed_tokens_split and not run.cp_gathered_kv:
        return Moves()
    h, att = cfg.hidden, op_count(cfg.ops, OP.ATT_MM) / 4
    sp_c = sp_b = t_c = into = copy = 0.0
    if run.gathered_tp_input:
        sp_c += att * h  # the mixer's first linears read the gathered sequence
        if cfg.attn_kind == "mla":
            # The tp-replicated down-projections and latent norms run on the gathered sequence.
            latents = cfg.q_lora_rank + cfg.kv_lora_rank
            sp_c += att * latents
            sp_b += att * run.norm_bytes * (latents + cfg.rope_dim)
        n_ff = op_count(cfg.ops, OP.FF_MM)
        if cfg.experts <= 1:
            sp_c += n_ff // 2 * h  # a dense feed-forward's input
        elif cfg.shared_experts and run.routed_tokens_split:
            copy = h  # the router reads the chunk, the tp-split shared expert a gathered copy
    if cfg.experts > 1 and not run.routed_tokens_split:
        # The MoE gathers like a dense feed-forward: every tp rank routes (and combines) every token, and a MoE
        # beside its MLP normalises the gathered branches (hpdsl/bound/slots.py beside_slots' three norms).
        sp_c, t_c, into = sp_c + router, routed_w, routed_in
        sp_b += beside_norms(cfg) * run.norm_bytes * h
    kv = masks = 0.0
    if run.cp_gathered_kv and op_count(cfg.ops, OP.ATT_BMM) and cfg.attn_kind in ("full", "sliding", "mla"):
        masks = op_count(cfg.ops, OP.ATT_BMM) / 2
        kv = masks * (cfg.kv_heads * cfg.head_dim * 2)
        if cfg.attn_kind == "mla":  # keys nope + rope wide, values v wide, per head (gathered after up-projection)
            kv = masks * cfg.kv_heads * ((cfg.nope_dim or cfg.head_dim) + cfg.rope_dim + cfg.head_dim)
    return Moves(sp_c=sp_c, sp_b=sp_b, t_c=t_c, routed_in=into, sp_copy_c=copy, cp_kv_c=kv, cp_masks=masks)


__all__ = ["DEVICES", "KEPT", "Kept", "Moves", "backend_facts", "backend_strategy", "beside_norms", "gathered_moves"]
