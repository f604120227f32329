"""Sequence parallelism under tp: the activations between a model's blocks sharded over the sequence.

With the strategy's sequence_parallel at tp > 1, `sequence_parallel(model, tp)`
applies PyTorch's own styles (torch.distributed.tensor.parallel) around the
families' colwise/rowwise layouts (hpdsl/torch/layout.py):

- the embedding's output (vocabulary-parallel, summed over tp) is kept as this
  rank's sequence chunk (PrepareModuleOutput Replicate → Shard(1));
- every norm of a layer (`*_norm`) is torch's `SequenceParallel`: it runs on
  the chunk, its replicated weight's gradient summed over tp by DTensor;
- each mixer and feed-forward gathers the sequence on entry
  (PrepareModuleInput Shard(1) → Replicate) and keeps its chunk of the
  tp-reduced output (PrepareModuleOutput Replicate → Shard(1)), so the
  residual stream, the norms' inputs and the residual adds are 1/tp per rank;
- a MoE whose routed experts are whole on every tp rank (not split by a tp
  layout; an etp split lies across data-parallel ranks, hpdsl/torch/parallelize.py)
  routes this rank's chunk only (`_local_moe`; under etp its peers at the same tp
  place gather it), so its experts' gradients, summed over the expert
  data-parallel group dp·cp·tp/(ep·etp), are divided by dp·cp, not dp·cp·tp;
- a MoE beside a dense MLP (MoEBesideMLP: Gemma 4) reads the residual stream too:
  gathered with its normed input where it gathers, and where it routes the chunk
  its branch norms run on the chunk and the tp-split MLP gathers its own input;
- the final norm runs on the chunk and its output is gathered for the head;
- an MTP layer (hpdsl/torch/layers.py `MTPLayer`) runs on the chunk like a
  body layer: its embedding and hidden norms are `SequenceParallel`, its
  column-parallel 2h→h projection gathers the sequence and keeps its chunk
  (its layout's style in its sequence-parallel form: hpdsl/torch/layout.py
  `GatheredColwise`), its decoder layer is wrapped as the body's are, and its
  final norm's output is gathered for the shared head.

The residual stream stays plain tensors (each rank's chunk) between the hooks.
"""

from __future__ import annotations

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import (PrepareModuleInput, PrepareModuleOutput, SequenceParallel,
                                               parallelize_module)

from hpdsl.bound.outer import stated_outer
from hpdsl.errors import BuildError
from hpdsl.ir.nodes import ModelIR
from hpdsl.torch.modules.moe import MoE, MoEBesideMLP, latent_projections
from hpdsl.torch.pipeline import StageChunk

_SEQ = Shard(1)
"""Activations are [batch, seq, hidden]: the sequence is dim 1."""


def model_refusals(model: ModelIR) -> tuple[str, ...]:
    """Return why this backend cannot run `model` sequence-parallel (empty: it can)."""
    reasons = []
    if {"encoder", "decoder"} <= {g.kind for g in model.groups} or model.position_buckets:
        reasons.append(f"{model.name} is an encoder-decoder or has a relative position bias: sequence "
                       "parallelism is built for decoder-only models")
    if model.learned_positions:
        reasons.append(f"{model.name} adds a learned position table to the tokens: not sequence-parallel yet")
    if outer := stated_outer(model):
        reasons.append(f"{model.name} states the outer wiring {outer} (docs/language.md, \"The model's outer "
                       "wiring\"): not sequence-parallel yet")
    return tuple(reasons)


def _gather_in(inputs: int = 1) -> PrepareModuleInput:
    return PrepareModuleInput(input_layouts=(_SEQ,) * inputs, desired_input_layouts=(Replicate(),) * inputs,
                              use_local_output=True)


def _chunk_out() -> PrepareModuleOutput:
    return PrepareModuleOutput(output_layouts=(Replicate(),), desired_output_layouts=(_SEQ,), use_local_output=True)


def _replicated_experts(moe: MoE) -> bool:
    """Return whether no tp layout splits the routed experts (an etp split is not over tp): they run on the chunk."""
    return not any(isinstance(p, DTensor) for p in moe.experts.parameters())


def _local_moe(moe: MoE, tp: DeviceMesh) -> None:
    """Route each tp rank's own sequence chunk (Megatron's MoE under SP, etp 1).

    The router, the shared-expert gate and the latent projections run on the chunk's tokens
    (SequenceParallel over the flattened tokens, dim 0: their replicated weights'
    gradients summed over tp); the routed experts see only this rank's tokens;
    a tp-split shared expert gathers the tokens and keeps its chunk of the
    output. Gathering the flattened [b·s/tp, h] tokens orders them by rank, then
    batch row: a permutation, which a per-token module undoes on the way out.
    """
    # The routed experts' latent projections (replicated) run on the chunk's tokens too.
    latent = latent_projections(moe.latent_proj) if moe.latent_proj is not None else ()
    for linear in (moe.router, moe.shared_expert_gate, *latent):
        if linear is not None:
            parallelize_module(linear, tp, SequenceParallel(sequence_dim=0, use_local_output=True))
    for expert in moe.shared_experts or ():
        parallelize_module(expert, tp, PrepareModuleInput(input_layouts=(Shard(0),), desired_input_layouts=(
            Replicate(),), use_local_output=True))
        parallelize_module(expert, tp, PrepareModuleOutput(output_layouts=(Replicate(),), desired_output_layouts=(
            Shard(0),), use_local_output=True))
    moe.routes_chunk = True


def routes_chunks(module: nn.Module) -> bool:
    """Return whether `module` (routed experts' MoE) routes only this tp rank's sequence chunk."""
    return isinstance(module, MoE) and module.routes_chunk


def sequence_parallel(model: nn.Module, tp: DeviceMesh, *, route_chunks: bool = True) -> nn.Module:
    """Shard `model`'s activations between blocks over the sequence on the tp mesh (in place); return it.

    `route_chunks`: a MoE with tp-replicated experts routes each rank's chunk; only
    when something sums those experts' gradients over tp (FSDP2 over dp·cp·tp/ep),
    else it gathers the sequence like a dense feed-forward.
    """
    embed, norm, layers = (getattr(model, name, None) for name in ("embed", "norm", "layers"))
    chunk = isinstance(model, StageChunk)  # a pipeline chunk: the embedding or the final norm or neither
    if (layers is None or (not chunk and (embed is None or norm is None))
            or getattr(model, "positions", None) is not None):
        raise BuildError("sequence parallelism is built for decoder-only models without a "
                         f"learned position table (embed, layers, norm), not {type(model).__name__}'s")
    if isinstance(model, StageChunk):
        model.sequence_shards = tp.size()
    for table in (embed, getattr(model, "embed_copy", None)):  # a last pipeline chunk's copy (MTP, tied head)
        if table is not None:
            parallelize_module(table, tp, _chunk_out())
    for layer in (layers.values() if isinstance(layers, nn.ModuleDict) else layers):
        _sequence_parallel_layer(layer, tp, route_chunks)
    for mtp in getattr(model, "mtp", None) or ():
        for child in (mtp.enorm, mtp.hnorm):
            parallelize_module(child, tp, SequenceParallel(use_local_output=True))
        # A tp-split projection takes and gives this rank's chunk; a replicated one runs on the chunk as it is.
        mtp.eh_proj.sequence_sharded = True
        _sequence_parallel_layer(mtp.layer, tp, route_chunks)
        _gathered_norm(mtp.norm, tp)
    if norm is not None:
        _gathered_norm(norm, tp)
    return model


def _sequence_parallel_layer(layer: nn.Module, tp: DeviceMesh, route_chunks: bool) -> None:
    """Run a decoder layer's norms and gates on the chunk and gather the sequence into its mixer and feed-forward."""
    for name, child in layer.named_children():
        # a gate (`wiring gated`) scales a block's chunked output: its scalar's gradient sums over the chunks, as a norm's
        if name.endswith(("_norm", "_gate")):
            parallelize_module(child, tp, SequenceParallel(use_local_output=True))
        elif isinstance(child, MoE) and route_chunks and _replicated_experts(child):
            _local_moe(child, tp)
            if isinstance(child, MoEBesideMLP):
                _beside_on_chunk(child, tp)
        elif name in ("mixer", "ffn", "cross_attention"):
            # A feed-forward that reads the residual stream too (MoEBesideMLP) gathers both of its inputs.
            parallelize_module(child, tp, _gather_in(2 if getattr(child, "reads_residual", False) else 1))
            parallelize_module(child, tp, _chunk_out())


def _beside_on_chunk(moe: MoEBesideMLP, tp: DeviceMesh) -> None:
    """Run a chunk-routing MoE's branch norms on the chunk and gather the sequence into the dense MLP beside it.

    Its input and residual stay this rank's chunk (the experts route it, `_local_moe`); the
    tp-split MLP gathers the sequence and keeps its chunk of the output, as a dense feed-forward.
    """
    for norm in (moe.mlp_post_norm, moe.moe_norm, moe.moe_post_norm):
        parallelize_module(norm, tp, SequenceParallel(use_local_output=True))
    parallelize_module(moe.mlp, tp, _gather_in())
    parallelize_module(moe.mlp, tp, _chunk_out())


def _gathered_norm(norm: nn.Module, tp: DeviceMesh) -> None:
    """Run a norm before the head on the chunk and gather its output over the sequence."""
    parallelize_module(norm, tp, SequenceParallel(use_local_output=True))
    parallelize_module(norm, tp, PrepareModuleOutput(output_layouts=(_SEQ,), desired_output_layouts=(Replicate(),),
                                                     use_local_output=True))


__all__ = ["model_refusals", "routes_chunks", "sequence_parallel"]
