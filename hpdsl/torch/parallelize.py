"""A built model and the Strategy the estimator priced into a model parallelised by PyTorch's own engine.

What each strategy field becomes (docs/validation.md, "Training runs"):

- tp, cp, ep: applied when the model is built for the job's mesh (the families'
  layouts over tp, ring attention and ring MLA over cp, Gated DeltaNet's state
  handed rank to rank over cp, all-to-all experts over ep; cp_kind a2a, Ulysses's
  head all-to-all, is refused); an MTP layer's 2h→h projection too, as its
  family's layout says (families/projection.hpf, hpdsl/torch/layout.py);
  `train_mesh` lays the mesh out as (pp, dp_shard, ep, etp, cp, tp), ep and etp
  carved out of dp (the estimator carves them out of dp·cp·tp; this backend out of
  dp only); etp splits each expert's width (hpdsl/torch/modules/moe.py);
- sequence_parallel at tp > 1: hpdsl/torch/sequence.py shards the activations
  between blocks over the sequence (torch's SequenceParallel norms,
  PrepareModuleInput/Output around the tp regions; a MoE with tp-replicated experts
  routes each rank's chunk); a whole CausalLM only, not a pipeline chunk yet;
- dp with ZeRO on FSDP2 (`fully_shard`): `os+grad+params` (ZeRO-3), resharding
  parameters after each layer's forward when the profile states `reshard_params`
  (FSDP2's reshard_after_forward; the estimator's transient reads the same fact).
  FSDP2 always shards the parameters' storage and reduce-scatters gradients, so
  `os+grad` (ZeRO-2: a whole replica of the parameters), `os` (ZeRO-1) and `none`
  under dp·cp > 1 cannot be expressed and are refused. Dense parameters shard over every
  data-parallel rank (dp·cp, ep included); routed experts, whole on every tp
  rank (their layout replicates them), over the expert data-parallel group
  dp·cp·tp/(ep·etp) (the ranks that hold the same experts, tp included, as the
  estimator's ZeRO divides them), their gradients averaged like the dense ones;
- gradient accumulation without pp (global batch > micro_batch·dp): each step runs
  the strategy's micro-batches forward and backward, each loss divided by their
  count, then one optimizer step; with the profile's deferred_grad_accumulation
  FSDP2 reduces nothing before the last micro-batch (`gradient_sync`), otherwise
  it reduce-scatters every micro-batch's gradients into the sharded ones;
- recompute `full` checkpoints whole layers, `selective` each attention's core
  (scores, softmax, A·V: Megatron's selective recompute, hpdsl/torch/modules/common.py
  `core_attention`), the MTP layers too unless only the first `recompute_layers`
  layers are, with `torch.utils.checkpoint` (non-reentrant);
- pp: `train_mesh` puts a pp axis outermost; hpdsl/torch/pipeline.py cuts the
  model into pp·vpp chunks where the estimator cuts it and runs them with
  torch.distributed.pipelining's 1F1B (interleaved when vpp > 1); each chunk is
  parallelised like a whole model over its stage's (dp_shard, ep, cp, tp) mesh.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Shard
from torch.utils.checkpoint import checkpoint

from hpdsl.cost.facts.backend import KEPT
from hpdsl.errors import BuildError
from hpdsl.model.strategy import Strategy
from hpdsl.torch.layers import CausalLM, MTPLayer
from hpdsl.torch.modules import GroupedExperts
from hpdsl.torch.pipeline import StageChunk
from hpdsl.torch.sequence import routes_chunks, sequence_parallel

MESH_AXES = ("pp", "dp_shard", "ep", "etp", "cp", "tp")
"""The training mesh's axes, outermost first; the data-parallel ranks are dp_shard·ep·etp·cp."""
STAGE_AXES = MESH_AXES[1:]
"""The axes of one pipeline stage's mesh: what a stage's modules are built and sharded over."""

_FSDP_ZERO = ("os+grad+params",)
"""The ZeRO levels FSDP2 expresses."""
PRECISIONS = tuple(KEPT)
"""The precisions this backend trains: fp32, and bf16 compute over fp32 parameters, gradients and moments (the
estimate reads what each keeps from the same table, hpdsl/cost/facts/backend.py `KEPT`)."""

Init = Callable[[nn.Module], None]
"""Materialises what of a module is still on the meta device (hpdsl/torch/init.py `shard_init`)."""


def refusals(strategy: Strategy) -> tuple[str, ...]:
    """Return every reason this backend cannot run `strategy` (empty: it can)."""
    reasons = list(_pipeline_refusals(strategy))
    expert = strategy.ep * strategy.etp
    if expert > 1 and strategy.dp % expert:
        named = f"ep·etp={expert}" if strategy.etp > 1 else f"ep={strategy.ep}"
        reasons.append(f"{named} must divide dp={strategy.dp}: this backend carves ep and etp out of dp only")
    if strategy.dp * strategy.cp > 1 and strategy.zero not in _FSDP_ZERO:
        reasons.append(f"zero={strategy.zero} under dp·cp={strategy.dp * strategy.cp}: FSDP2 always shards "
                       "the parameters and reduce-scatters the gradients, so it runs only os+grad+params "
                       "(ZeRO-3; reshard after forward as the profile's reshard_params says)")
    elif strategy.tp > 1 and strategy.zero in ("os", "os+grad"):
        # The estimator shards the experts' states over their data-parallel group, tp included.
        reasons.append(f"zero={strategy.zero} under tp={strategy.tp}: FSDP2 cannot shard the experts' optimizer "
                       "states or gradients alone (over their dp·cp·tp/ep ranks); use none or os+grad+params")
    if strategy.cp > 1 and strategy.cp_kind != "ring":
        # The estimator prices a2a as Ulysses's head all-to-all (hpdsl/cost/formulas/comm.py); the modules' cp forms
        # gather or hand on the sequence, which is what `ring` prices.
        reasons.append(f"cp_kind={strategy.cp_kind} at cp={strategy.cp}: this backend builds the ring form of cp "
                       "(keys and values gathered, Gated DeltaNet's state handed on), not Ulysses's all-to-all")
    if strategy.precision not in PRECISIONS:
        reasons.append(f"precision={strategy.precision}: this backend trains fp32 or bf16-mixed")
    if strategy.recompute not in ("none", "selective", "full"):
        reasons.append(f"recompute={strategy.recompute}: takes none, selective or full")
    return tuple(reasons)


def _pipeline_refusals(strategy: Strategy) -> tuple[str, ...]:
    """Return what torch.distributed.pipelining's 1F1B schedules cannot run of the strategy's pipeline."""
    pp, vpp, micro = strategy.pp, strategy.vpp, strategy.micro_batches
    if pp == 1:
        return (f"vpp={vpp} without pp > 1: nothing to interleave",) if vpp > 1 else ()
    if micro < pp:
        return (f"pp={pp} with {micro} micro-batches: 1F1B needs at least pp micro-batches per step "
                "(raise --global-batch)",)
    rounds = max(1, micro // pp)
    if vpp > 1 and micro % rounds:
        return (f"{micro} micro-batches: the interleaved schedule needs a multiple of its "
                f"{rounds} rounds (micro-batches // pp)",)
    return ()


def require_runnable(strategy: Strategy) -> None:
    """Raise BuildError listing every reason this backend cannot run `strategy`."""
    reasons = refusals(strategy)
    if reasons:
        raise BuildError("the torch backend cannot run this strategy: " + "; ".join(reasons))


def train_mesh(strategy: Strategy, device: str = "cpu") -> DeviceMesh:
    """Return the job's mesh (pp, dp_shard, ep, etp, cp, tp) for `strategy` in the current process group."""
    require_runnable(strategy)
    shape = (strategy.pp, strategy.dp // (strategy.ep * strategy.etp), strategy.ep, strategy.etp, strategy.cp,
             strategy.tp)
    return init_device_mesh(device, shape, mesh_dim_names=MESH_AXES)


def stage_mesh(mesh: DeviceMesh) -> DeviceMesh:
    """Return this rank's pipeline stage's mesh (dp_shard, ep, etp, cp, tp) of the job's mesh."""
    return mesh[STAGE_AXES]


def coordinates(mesh: DeviceMesh) -> dict[str, int]:
    """Return this rank's index on every axis of the training mesh."""
    return {axis: mesh[axis].get_local_rank() for axis in MESH_AXES}


def data_rank(mesh: DeviceMesh) -> tuple[int, int]:
    """Return (this rank's index among the data-parallel groups dp_shard·ep·etp, their count)."""
    c = coordinates(mesh)
    ep, etp = mesh["ep"].size(), mesh["etp"].size()
    return (c["dp_shard"] * ep + c["ep"]) * etp + c["etp"], mesh["dp_shard"].size() * ep * etp


def parallelize(model: nn.Module, strategy: Strategy, mesh: DeviceMesh | None = None, *,
                reshard_params: bool = False, init: Init | None = None) -> nn.Module:
    """Apply the strategy's recompute, dp/ZeRO and precision to a model built for `mesh` (in place); return it.

    `reshard_params` is the profile's run fact (default false, as there): ZeRO-3 frees a
    layer's gathered parameters after its forward. With `init`, a model built on the
    meta device is materialised one FSDP2 unit at a time, each just before it is
    sharded, so no rank ever holds more than its shards and one unit whole.
    bf16-mixed shards with FSDP2's MixedPrecisionPolicy (bf16 parameters in the
    forward and backward, gradients reduced and kept in fp32, the fp32 shards the
    optimizer updates): a BuildError where FSDP2 cannot apply it.
    """
    require_runnable(strategy)
    sp = bool(strategy.sequence_parallel) and strategy.tp > 1 and isinstance(model, (CausalLM, StageChunk))
    if sp:
        if mesh is None:
            raise BuildError(f"sequence parallelism over tp={strategy.tp} needs the job's mesh (train_mesh)")
        sequence_parallel(model, mesh["tp"], route_chunks=strategy.zero in _FSDP_ZERO)
    _recompute(model, strategy)
    data = strategy.dp * strategy.cp
    mixed = strategy.precision == "bf16-mixed"
    if not mixed and (strategy.zero not in _FSDP_ZERO or data * strategy.tp == 1):
        if init is not None:
            init(model)
        return model  # zero none at dp·cp 1 (refusals): nothing to shard
    if mesh is None or tuple(mesh.mesh_dim_names or ()) not in (MESH_AXES, STAGE_AXES):
        raise BuildError(f"dp·cp·tp={data * strategy.tp}{' at bf16-mixed' if mixed else ''} needs the job's mesh "
                         f"with axes {MESH_AXES} (train_mesh makes it) or a stage's {STAGE_AXES}")
    shard = functools.partial(_shard, reshard=reshard_params, init=init, mixed=mixed)
    if strategy.zero not in _FSDP_ZERO:
        # bf16-mixed over one data-parallel rank (refusals): FSDP2 over that one-rank mesh shards nothing and
        # reduces nothing, it only casts the bf16 copies; each unit's fp32 weights are the master the optimizer updates.
        alone = mesh["dp_shard", "ep", "etp", "cp"]._flatten("fsdp")
        for experts_unit in [m for m in model.modules() if isinstance(m, GroupedExperts)]:
            shard(experts_unit, alone)  # their own unit, as under ZeRO-3: tp-replicated, beside tp's DTensors
        for layer in _layers(model):
            shard(layer, alone)
        shard(model, alone)
        return model
    experts = mesh["dp_shard", "cp", "tp"]._flatten("efsdp")
    for moe in model.modules():
        for module in moe.children():
            if isinstance(module, GroupedExperts):
                shard(module, experts)
                # tp ranks routing the same tokens hold equal gradients; under SP each its own chunk's.
                _divide(module, float(data * (1 if routes_chunks(moe) else strategy.tp)))
    if data > 1 or mixed:
        dense = mesh["dp_shard", "ep", "etp", "cp"]._flatten("fsdp")
        for layer in _layers(model):
            shard(layer, dense)
        shard(model, dense)
    elif init is not None:
        init(model)
    if dist.get_backend(experts.get_group()) == "gloo":
        for module in model.modules():  # gloo has neither AVG nor PREMUL_SUM: sum, then divide
            if isinstance(module, FSDPModule):
                module.set_force_sum_reduction_for_comms(True)
    return model


def _shard(module: nn.Module, mesh: DeviceMesh, *, reshard: bool, init: Init | None, mixed: bool) -> None:
    """Materialise `module`'s meta parameters (with `init`), then fully_shard it over `mesh`."""
    if init is not None:
        init(module)
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed
              else MixedPrecisionPolicy())
    fully_shard(module, mesh=mesh, reshard_after_forward=reshard, shard_placement_fn=_even(mesh.size()),
                mp_policy=policy)


def gradient_sync(model: nn.Module, on: bool) -> None:
    """Turn FSDP2's gradient reduction on or off for the next backward of every FSDP2 module in `model`.

    Off: each parameter's gradient stays unsharded and adds up over the
    micro-batches, to be reduce-scattered once by the backward that runs with it
    on (the run fact deferred_grad_accumulation; docs/cost-model.md#what-hpdsl-train-runs).
    """
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_requires_gradient_sync(on, recurse=False)


def _even(ranks: int) -> Callable[[nn.Parameter], Shard | None]:
    """Return FSDP2's shard_placement_fn splitting a plain parameter on its first dim that `ranks` divide.

    FSDP2 shards dim 0 by default and leaves the remainder of an uneven dim 0 on the
    first ranks (a shared-expert gate [1, hidden] sits whole on rank 0); an even dim
    gives every rank the 1/ranks the estimator prices. A tp-split DTensor keeps dim 0; a
    tp-replicated one (a sequence-parallel gate) is placed like a plain parameter.
    """
    def place(param: nn.Parameter) -> Shard | None:
        split = isinstance(param, DTensor) and any(p.is_shard() for p in param.placements)
        if split or param.ndim == 0 or param.shape[0] % ranks == 0:
            return None
        return next((Shard(d) for d, size in enumerate(param.shape) if size % ranks == 0), None)

    return place


def _divide(module: nn.Module, factor: float) -> None:
    # The experts' gradients already sum over the ep ranks (all-to-all), and the tp ranks hold equal
    # copies (they share their data): the reduce-scatter over dp·cp·tp/(ep·etp) sums tp copies, so divide by
    # dp·cp·tp. Under etp the gathered tokens already bring the etp peers' contributions in, as ep's do.
    assert isinstance(module, FSDPModule)
    shard = next(module.parameters())
    if isinstance(shard, DTensor) and shard.device_mesh.size() == 1:
        # On a one-rank mesh FSDP2 (torch 2.13, forced sum on gloo) divides by a set factor twice: in its
        # copy standing in for the reduce-scatter and again after it. Divide once, after the reduction.
        def divide(grad: torch.Tensor) -> None:
            grad.div_(factor)

        module.set_all_reduce_hook(divide)
        return
    module.set_gradient_divide_factor(factor)


def _layers(model: nn.Module) -> list[nn.Module]:
    layers = getattr(model, "layers", None)  # a pipeline chunk keys its layers by model index
    if isinstance(layers, nn.ModuleDict):
        return list(layers.values())
    return list(layers) if isinstance(layers, nn.ModuleList) else []


def _recompute(model: nn.Module, strategy: Strategy) -> None:
    if strategy.recompute == "none":
        return
    layers = _layers(model)
    count = len(layers) if strategy.recompute_layers is None else min(strategy.recompute_layers, len(layers))
    # The estimator recomputes the MTP layers too when every layer is (hpdsl/cost/price/ranks.py); under full
    # an MTP layer keeps its two inputs (the hidden state and the embedded tokens) and its final norm's input,
    # as it prices them (the norm belongs to the output part, never recomputed).
    mtp = list(getattr(model, "mtp", None) or ()) if strategy.recompute_layers is None else []
    for layer in layers[:count] + mtp:
        if strategy.recompute == "selective":
            _recompute_core(layer)
        else:
            _checkpointed(layer, "mix" if isinstance(layer, MTPLayer) else "forward")


def _recompute_core(layer: nn.Module) -> None:
    """Make every attention of `layer` rerun its core (scores, softmax, A·V) in the backward: Megatron's selective.

    A mixer without a score tensor (Gated DeltaNet, Mamba: their fused kernels
    already keep only their inputs) and a feed-forward-only layer recompute nothing,
    as the estimator prices them (docs/cost-model.md).
    """
    for module in layer.modules():
        if hasattr(module, "recompute_core"):
            setattr(module, "recompute_core", True)


def _checkpointed(module: nn.Module, method: str = "forward") -> None:
    """Make `module` recompute its forward (or `method`) in backward (its parameter names stay as they are)."""
    forward = getattr(module, method)

    @functools.wraps(forward)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return forward(*args, **kwargs)
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    setattr(module, method, run)  # an instance attribute: nn.Module.__call__ and the class's forward find it first
