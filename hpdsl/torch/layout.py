"""A family's tensor-parallel layout (FamilyIR.layout) and a freshly built module into a sharded module.

`apply_layout` runs inside construct_family, right after the variant's
constructor and before anyone uses the module, in this order:

1. the module's parameters are exactly the layout's present entries for the
   chosen variant (hpdsl.ir.layouts.entry_present, on the build config): each
   is declared by its params(...) and has an entry whose `if` holds, and each
   present entry of non-zero size is a parameter of the module (families
   without a layout are left alone: such a module handles tp itself or is
   replicated);
2. each entry's dims, evaluated on the build config and the job's cp/ep/pp
   (hpdsl/ir/layouts.py), equal the parameter's shape, wherever the config has
   every name they read (a replacement built without a config is not checked);
3. at tp > 1, every sharded parameter's split dim must split
   (hpdsl.ir.layouts.split_problem, the rule the compiler proves for bounded tp),
   all checked before any parameter is sharded;
4. the module is sharded over the mesh's tp axis with DTensor's
   parallelize_module: an nn.Linear whose weight (and bias) is colwise gets
   ColwiseParallel (`SharedInputColwise`: the colwise linears reading one
   input share its gradient's all-reduce), one whose weight is rowwise and bias replicated
   RowwiseParallel, an nn.Embedding whose table splits on dim 0 (vocabulary
   rows) RowwiseParallel; a module with `local_output = False` keeps its
   output a DTensor (the output head: logits split over the vocabulary), a
   colwise one with `gather_output = True` gathers its output whole
   (`GatheredColwise`: an MTP layer's eh_proj, for the decoder layer after it);
   replicated parameters stay plain tensors;
5. every submodule defining `tensor_parallel_applied(tp)` is then told
   (an attention's per-head norms, replicated but fed only this rank's heads,
   sum their gradients over tp there).

The result, kept in the module's FamilyBuildInfo, records every parameter's
logical (unsharded) and local shape and its placement. Each rank shards its own
copy, without a scatter from a source rank: build on the meta device and
materialise after sharding, or build every rank from the same seed.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import attrs
from torch import nn
from torch.distributed import ProcessGroup
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel, parallelize_module

from hpdsl.errors import BuildError
from hpdsl.ir.conditions import render_condition
from hpdsl.ir.layouts import (covers, declared_params, entry_numel, entry_present, evaluate_dim, layout_for,
                              render_dims, split_problem, whole)
from hpdsl.ir.nodes import FamilyIR, LayoutEntryIR
from hpdsl.bound.config import dim_environment
from hpdsl.model.layouts import LAYOUT_AXES
from hpdsl.torch.mesh import ContextLike, JobContext, job_context


@attrs.frozen(eq=False)
class TensorParallel:
    """The tp axis a module was sharded over, as `tensor_parallel_applied` hooks receive it (borrowed)."""

    mesh: DeviceMesh

    def __deepcopy__(self, memo: dict[int, Any]) -> TensorParallel:
        # Borrowed, never copied: a copied module runs on the same job.
        return self

    @property
    def group(self) -> ProcessGroup:
        """Return the tp process group."""
        return self.mesh.get_group()

    @property
    def rank(self) -> int:
        """Return this rank's coordinate on tp."""
        return self.mesh.get_local_rank()

    @property
    def size(self) -> int:
        """Return the tp size."""
        return self.mesh.size()


class GatheredColwise(ColwiseParallel):
    """ColwiseParallel whose output is gathered whole; its sequence-parallel form once the module is `sequence_sharded`.

    Megatron's ColumnParallelLinear with gather_output. Under sequence
    parallelism (hpdsl/torch/sequence.py sets `sequence_sharded`) its input is
    this rank's sequence chunk, gathered on entry, and its output this rank's
    chunk of the whole output: the backward reduce-scatters the input's
    gradient instead of all-reducing it.
    """

    def __init__(self) -> None:
        super().__init__(output_layouts=Replicate())

    @staticmethod
    def _prepare_input_fn(input_layouts: Any, desired_input_layouts: Any, mod: nn.Module, inputs: Any,
                          device_mesh: DeviceMesh) -> Any:
        layouts = (SEQUENCE,) if getattr(mod, "sequence_sharded", False) else input_layouts
        return ColwiseParallel._prepare_input_fn(layouts, desired_input_layouts, mod, inputs, device_mesh)

    @staticmethod
    def _prepare_output_fn(output_layouts: Any, use_local_output: bool, mod: nn.Module, outputs: Any,
                           device_mesh: DeviceMesh) -> Any:
        if not getattr(mod, "sequence_sharded", False):
            return ColwiseParallel._prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh)
        chunk = ColwiseParallel._prepare_output_fn((SEQUENCE,), use_local_output, mod, outputs, device_mesh)
        # Redistributed from output columns to sequence chunks, this rank's chunk is a view of the whole gathered
        # output: what the next layer saves of it would keep the whole sequence alive. A copy keeps the chunk only.
        return chunk.clone()


class SharedInputColwise(ColwiseParallel):
    """ColwiseParallel whose linears reading one input, within one forward of their family module, share it.

    Each colwise linear annotates its plain input as a replicated DTensor; made
    separately, each of those annotations all-reduces its own share of the
    input's gradient in the backward (q, k and v: three collectives). Shared, the
    linears' gradients add up on the one DTensor first and it all-reduces once:
    Megatron's column-parallel region (the `f` of docs/cost-model.md's tp terms),
    what torchtitan's plan gets from one PrepareModuleInput. `shared` is the
    family module's table of annotated inputs, emptied before and after each of
    its forwards; an input changed in place since is annotated again.
    """

    def __init__(self, shared: dict[int, tuple[Any, int, DTensor]], *, use_local_output: bool) -> None:
        super().__init__(use_local_output=use_local_output)
        self.shared = shared

    def _prepare_input_fn(self, input_layouts: Any, desired_input_layouts: Any,  # type: ignore[override]
                          mod: nn.Module, inputs: Any, device_mesh: DeviceMesh) -> Any:
        x = inputs[0]
        if isinstance(x, DTensor) or tuple(input_layouts) != tuple(desired_input_layouts):
            return ColwiseParallel._prepare_input_fn(input_layouts, desired_input_layouts, mod, inputs, device_mesh)
        held = self.shared.get(id(x))
        if held is not None and held[0]() is x and held[1] == x._version:
            return held[2]
        annotated = DTensor.from_local(x, device_mesh, input_layouts, run_check=False)
        self.shared[id(x)] = (weakref.ref(x), x._version, annotated)
        return annotated


SEQUENCE = Shard(1)
"""Activations are [batch, seq, hidden]: a sequence-parallel chunk is dim 1."""


@attrs.frozen
class ParameterLayout:
    """One parameter of a built family module: where it lives on tp, its logical and local shapes."""

    name: str
    placement: str
    dim: int | None
    logical_shape: tuple[int, ...]
    local_shape: tuple[int, ...]


@attrs.frozen
class AppliedLayout:
    """The layout a family module was built with: the tp size and every parameter's placement."""

    tp: int
    parameters: tuple[ParameterLayout, ...]

    @property
    def logical_shapes(self) -> dict[str, tuple[int, ...]]:
        """Return parameter name → its shape before tensor parallelism."""
        return {p.name: p.logical_shape for p in self.parameters}

    @property
    def sharded(self) -> tuple[ParameterLayout, ...]:
        """Return the parameters split over tp."""
        return tuple(p for p in self.parameters if p.dim is not None)


def apply_layout(module: nn.Module, family: FamilyIR, variant: str, *, config: Any,
                 context: ContextLike, where: str) -> AppliedLayout | None:
    """Verify `module` against its family's layout, shard it over tp, and return what was applied."""
    if family.layout is None:
        return None
    entries = layout_for(family, variant)
    params = dict(module.named_parameters())
    _check_coverage(params, entries, declared_params(family, variant), where, variant)
    job = job_context(None, context, where=where)
    env = {**dim_environment(config), **job.sizes.as_dict(LAYOUT_AXES)}
    _check_exact(params, entries, env, where, variant)
    for name, param in params.items():
        _check_shape(name, tuple(param.shape), entries[name], env, where)
    tp = job.size("tp")
    logical = {name: tuple(param.shape) for name, param in params.items()}
    if tp > 1 and any(entries[name].dim is not None for name in params):
        for name, param in params.items():
            _check_split(name, tuple(param.shape), entries[name], env, tp, where)
        _shard(module, params, entries, _tp_mesh(job, tp, where), where)
    return AppliedLayout(tp, tuple(_record(name, param, entries[name], logical[name])
                                   for name, param in module.named_parameters()))


def _record(name: str, param: nn.Parameter, entry: LayoutEntryIR, logical: tuple[int, ...]) -> ParameterLayout:
    local = param.to_local() if isinstance(param, DTensor) else param
    return ParameterLayout(name, entry.placement, entry.dim, logical, tuple(local.shape))


# --------------------------------------------------------------------------
# Verification, before any sharding
# --------------------------------------------------------------------------


def _check_coverage(params: Mapping[str, nn.Parameter], entries: Mapping[str, LayoutEntryIR],
                    declared: tuple[str, ...], where: str, variant: str) -> None:
    for name in params:
        if not any(covers(p, name) for p in declared):
            raise BuildError(f"{where}: parameter '{name}' of variant '{variant}' is not declared in its "
                             f"params({', '.join(declared)}); declare it and give it a layout entry")
        if name not in entries:
            placed = ", ".join(sorted(entries)) or "none"
            raise BuildError(f"{where}: parameter '{name}' of variant '{variant}' has no layout entry "
                             f"(the layout places {placed}); add `{name} (DIMS) colwise|rowwise|replicate`")


def _check_exact(params: Mapping[str, nn.Parameter], entries: Mapping[str, LayoutEntryIR], env: Mapping[str, int],
                 where: str, variant: str) -> None:
    """Raise unless the module has exactly the entries whose condition holds (unknown conditions pass)."""
    for name in params:
        if entry_present(entries[name], env) is False:
            raise BuildError(f"{where}: variant '{variant}' creates parameter '{name}', but its layout entry "
                             f"'{name}' is present only if {_condition(entries[name])}, which this config "
                             "does not meet; create it exactly when the condition holds, or correct the `if`")
    for path, entry in entries.items():
        if path not in params and entry_present(entry, env) and (entry_numel(entry, env) or 0) > 0:
            raise BuildError(f"{where}: the layout declares parameter '{path}' {render_dims(entry.dims)} for "
                             f"variant '{variant}'{_when(entry)}, but the module has no '{path}' (it has "
                             f"{', '.join(sorted(params)) or 'no parameters'}); create it, or give the entry "
                             "an `if` saying when it exists")


def _condition(entry: LayoutEntryIR) -> str:
    return "always" if entry.condition is None else render_condition(entry.condition)


def _when(entry: LayoutEntryIR) -> str:
    return "" if entry.condition is None else f" (if {render_condition(entry.condition)}, which holds)"


def _check_shape(name: str, shape: tuple[int, ...], entry: LayoutEntryIR, env: Mapping[str, int],
                 where: str) -> None:
    declared = [whole(evaluate_dim(d, env)) for d in entry.dims]
    if any(d is None for d in declared):
        return  # the config lacks a name the dims read (a replacement): nothing to compare
    if tuple(declared) != shape:
        raise BuildError(f"{where}: parameter '{name}' has shape {shape}, but the layout declares "
                         f"{render_dims(entry.dims)} = {tuple(declared)}")


def _check_split(name: str, shape: tuple[int, ...], entry: LayoutEntryIR, env: Mapping[str, int], tp: int,
                 where: str) -> None:
    if entry.dim is None:
        return
    unit = None if entry.unit is None else whole(evaluate_dim(entry.unit, env))
    problem = split_problem(shape[entry.dim], tp, unit)
    if problem is not None:
        by = "" if unit is None or entry.unit is None else f" in {unit} blocks (by {entry.unit.text})"
        raise BuildError(f"{where}: cannot shard parameter '{name}' over tp={tp}: its dim {entry.dim} "
                         f"has size {shape[entry.dim]}{by}, and {problem}")


def _tp_mesh(context: JobContext, tp: int, where: str) -> DeviceMesh:
    sub = None if context.mesh is None else context.mesh.axis_mesh("tp")
    if sub is None:
        raise BuildError(f"{where}: sharding over tp={tp} needs the job's DeviceMesh with a 'tp' axis")
    return sub


# --------------------------------------------------------------------------
# Sharding
# --------------------------------------------------------------------------


def _shard(module: nn.Module, params: Mapping[str, nn.Parameter], entries: Mapping[str, LayoutEntryIR],
           mesh: DeviceMesh, where: str) -> None:
    owners = sorted({name.rpartition(".")[0] for name in params if entries[name].dim is not None})
    shared: dict[int, tuple[Any, int, DTensor]] = {}
    plan = {owner: _style(module.get_submodule(owner), owner, entries, where, shared) for owner in owners}
    if any(isinstance(style, SharedInputColwise) for style in plan.values()):
        module.register_forward_pre_hook(lambda *_: shared.clear())
        module.register_forward_hook(lambda *_: shared.clear())
    for owner, style in plan.items():  # every style is known before the first module is sharded
        parallelize_module(module.get_submodule(owner), mesh, style)
    for sub in module.modules():
        hook = getattr(sub, "tensor_parallel_applied", None)
        if callable(hook):
            hook(TensorParallel(mesh))


def _style(owner: nn.Module, path: str, entries: Mapping[str, LayoutEntryIR], where: str,
           shared: dict[int, tuple[Any, int, DTensor]]) -> ParallelStyle:
    """Return the DTensor style that places the parameters of `owner` as its layout entries say."""
    prefix = f"{path}." if path else ""
    placed = {name: entries[prefix + name] for name, _ in owner.named_parameters(recurse=False)}
    weight, bias = placed.get("weight"), placed.get("bias")
    # A module may keep its output a DTensor (the output head's vocabulary-split logits, for loss_parallel).
    local = bool(getattr(owner, "local_output", True))
    style: ParallelStyle | None = None
    if isinstance(owner, nn.Linear) and weight is not None:
        if weight.dim == 0 and (bias is None or bias.dim == 0):
            style = GatheredColwise() if getattr(owner, "gather_output", False) else SharedInputColwise(
                shared, use_local_output=local)
        elif weight.dim == 1 and (bias is None or bias.dim is None):
            style = RowwiseParallel(use_local_output=local)
    elif isinstance(owner, nn.Embedding) and weight is not None and weight.dim == 0:
        # Vocabulary rows; every tp rank reads all the token ids, the lookups are summed over tp.
        style = RowwiseParallel(input_layouts=Replicate(), use_local_output=local)
    if style is None:
        found = ", ".join(f"{prefix}{n} {e.placement}" + ("" if e.dim is None else f"({e.dim})")
                          for n, e in placed.items())
        raise BuildError(f"{where}: the torch backend shards only nn.Linear modules, as ColwiseParallel (weight "
                         f"and bias colwise) or RowwiseParallel (weight rowwise, bias replicate), and "
                         f"nn.Embedding tables by vocabulary rows (weight split on dim 0); "
                         f"{path or 'the module'} is a {type(owner).__name__} with {found}")
    style.src_data_rank = None  # each rank shards its own copy: no scatter from a source rank
    return style


__all__ = ["AppliedLayout", "GatheredColwise", "ParameterLayout", "SEQUENCE", "SharedInputColwise", "TensorParallel",
           "apply_layout"]
