"""A family request into a constructed nn.Module that carries its provenance.

`build_family` resolves a request (resolve.py) and calls the chosen
constructor with the request's arguments plus, where the constructor names
them, the builder's own: `config`, `module`, `module_fqn`, `context` and the
selectors. The module it returns carries a FamilyBuildInfo: the request, the
resolved variant, a copy of the config, whether it was a direct build or a
replacement, where the family is declared, and the tensor-parallel layout
applied to it (hpdsl/torch/layout.py: verified, then sharded over the mesh's
tp axis, every parameter's logical shape recorded). `collect_family_modules`
finds every built family of a model by identity, and `validate_family_context`
rejects a model whose families were built for another job.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union

import attrs
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from hpdsl.diagnostics import did_you_mean
from hpdsl.errors import BuildError, HpdslError, ResolutionError
from hpdsl.ir.conditions import names_in
from hpdsl.ir.nodes import FamilyIR, SourceRef
from hpdsl.registry import Registry
from hpdsl.torch.layout import AppliedLayout, apply_layout
from hpdsl.torch.mesh import ContextLike, JobContext, JobMesh, job_context
from hpdsl.torch.resolve import (
    DEFAULT_PREFIXES, FamilyRequest, ResolvedFamily, describe, explicit_parameters, import_variant,
    resolve_family,
)

# What the builders take as `registry` (None: the standard registry). A RegistryIR is no
# longer accepted: compile_* return a Registry, and `Registry(ir)` wraps a bare one.
RegistryLike = Registry
Target = Union[str, FamilyIR, FamilyRequest, Callable[..., Any]]

_INFO = "_hpdsl_family"
# Errors a constructor raises about its own inputs; anything else is a bug and propagates.
_CONSTRUCTOR_ERRORS = (TypeError, ValueError, RuntimeError, NotImplementedError)


@attrs.frozen(hash=False)
class FamilyBuildInfo:
    """How a module was built: request, resolved variant, config copy, origin, path, mesh and tp layout."""

    request: FamilyRequest
    resolved: ResolvedFamily
    config: Any
    origin: Literal["direct", "replacement"]
    module_fqn: str
    allowed_prefixes: tuple[str, ...] = DEFAULT_PREFIXES
    mesh: JobMesh | None = attrs.field(default=None, eq=False)
    layout: AppliedLayout | None = None

    @property
    def logical_shapes(self) -> dict[str, tuple[int, ...]]:
        """Return parameter name → shape before tensor parallelism (empty when the family has no layout)."""
        return {} if self.layout is None else self.layout.logical_shapes

    def __deepcopy__(self, memo: dict[int, Any]) -> FamilyBuildInfo:
        # Immutable, and the mesh is borrowed: a copied module shares its provenance.
        return self

    @property
    def source(self) -> SourceRef | None:
        """Return where the family is declared."""
        return self.resolved.family.source

    @property
    def variant_source(self) -> SourceRef | None:
        """Return where the chosen variant is declared."""
        return self.resolved.variant.source


@attrs.frozen(eq=False)
class FamilyBoundary:
    """One built family instance and every path it has in a model (aliases, the root as "")."""

    module: nn.Module
    fqns: tuple[str, ...]
    info: FamilyBuildInfo


# --------------------------------------------------------------------------
# Registries and requests
# --------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def standard_registry() -> Registry:
    """Return the registry of hpdsl's shipped profiles and families (compiled once)."""
    from hpdsl.api import compile_sources  # the compiler needs lark; only load it when asked

    return compile_sources([], stdlib=True)


def as_registry(registry: Registry | None) -> Registry:
    """Return `registry`, or the standard registry for None; BuildError for anything else."""
    if registry is None:
        return standard_registry()
    if not isinstance(registry, Registry):
        raise BuildError(f"registry must be an hpdsl.Registry (from hpdsl.compile_paths, "
                         f"compile_sources or load_registry), found {type(registry).__name__}")
    return registry


def family_request(target: Target, arguments: Mapping[str, Any], *, registry: RegistryLike | None = None,
                   module_fqn: str = "",
                   allowed_prefixes: Sequence[str] = DEFAULT_PREFIXES) -> FamilyRequest:
    """Return the request for `target`: a request, a FamilyIR, a family name, factory path or factory."""
    where = describe(module_fqn)
    if isinstance(target, FamilyRequest):
        if arguments:
            raise ResolutionError(f"{where}: a FamilyRequest cannot be combined with more keywords "
                                  f"({sorted(arguments)}); use request.with_arguments(...)")
        return target
    if isinstance(target, FamilyIR):
        return FamilyRequest(target, arguments)
    families = as_registry(registry).families
    if isinstance(target, str):
        family = _family_by_name(families, target, where)
    elif callable(target):
        family = _family_by_factory(families, target, where, allowed_prefixes)
    else:
        raise ResolutionError(f"{where}: a family target is a name, a factory, a FamilyIR or a "
                              f"FamilyRequest, found {type(target).__name__}")
    return FamilyRequest(family, arguments)


def _family_by_name(families: Mapping[str, FamilyIR], name: str, where: str) -> FamilyIR:
    if ":" not in name:
        if name in families:
            return families[name]
        raise ResolutionError(f"{where}: the registry has no family '{name}'; "
                              f"{did_you_mean(name, families)}")
    return _only_one(name, [f for f in families.values() if f.factory == name], where)


def _family_by_factory(families: Mapping[str, FamilyIR], factory: Callable[..., Any], where: str,
                       allowed_prefixes: Sequence[str]) -> FamilyIR:
    # Import only the factories whose attribute name matches: identity decides.
    name = getattr(factory, "__qualname__", "")
    candidates = [f for f in families.values() if f.factory.partition(":")[2] == name]
    matches = [f for f in candidates
               if import_variant(f.factory, allowed_prefixes, where=f"{where}: family '{f.name}'") is factory]
    return _only_one(f"{getattr(factory, '__module__', '?')}:{name}", matches, where)


def _only_one(what: str, matches: list[FamilyIR], where: str) -> FamilyIR:
    if len(matches) == 1:
        return matches[0]
    found = ", ".join(f"'{f.name}'" for f in matches) or "none"
    raise ResolutionError(f"{where}: '{what}' must be the factory of exactly one family in the registry; "
                          f"it is the factory of {found}")


# --------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------


def build_family(target: Target, *, config: Any = None, mesh: DeviceMesh | JobMesh | None = None,
                 module: nn.Module | None = None, module_fqn: str = "",
                 context: ContextLike = None, registry: RegistryLike | None = None,
                 allowed_prefixes: Sequence[str] = DEFAULT_PREFIXES, **arguments: Any) -> nn.Module:
    """Resolve a family for the job and construct the chosen variant, provenance attached."""
    where = describe(module_fqn)
    request = family_request(target, arguments, registry=registry, module_fqn=module_fqn,
                             allowed_prefixes=allowed_prefixes)
    if (config is None) == (module is None):
        found = "both" if config is not None else "neither"
        raise BuildError(f"{where}: family '{request.family.name}' needs exactly one of config "
                         f"(direct build) or module (replacement); found {found}")
    job = job_context(mesh, context, where=where)
    resolved = resolve_family(request, job, module_fqn=module_fqn, allowed_prefixes=allowed_prefixes)
    return construct_family(request, resolved, config=config, module=module, module_fqn=module_fqn,
                            context=job, allowed_prefixes=allowed_prefixes)


def construct_family(request: FamilyRequest, resolved: ResolvedFamily, *, config: Any = None,
                     module: nn.Module | None = None, module_fqn: str = "",
                     context: ContextLike, allowed_prefixes: Sequence[str] = DEFAULT_PREFIXES,
                     ) -> nn.Module:
    """Construct an already resolved variant and attach its provenance."""
    where = f"{describe(module_fqn)}: family '{resolved.family.name}'"
    job = job_context(None, context, where=describe(module_fqn))
    name = getattr(resolved.constructor, "__qualname__", repr(resolved.constructor))
    kwargs = _constructor_arguments(resolved, copy.deepcopy(config), module, module_fqn, job, where)
    try:
        result = resolved.constructor(**kwargs)
    except (BuildError, ResolutionError) as exc:
        if exc.message.startswith(describe(module_fqn)):
            raise
        raise type(exc)(f"{where}: {exc.message}") from exc  # every error names the module
    except HpdslError:
        raise
    except _CONSTRUCTOR_ERRORS as exc:
        raise BuildError(f"{where}: {name} failed: {exc}") from exc
    if not isinstance(result, nn.Module):
        raise BuildError(f"{where}: {name} returned a {type(result).__name__}, not a torch nn.Module")
    layout = apply_layout(result, resolved.family, resolved.variant.name, config=config, context=job,
                          where=f"{where} (variant '{resolved.variant.name}')")
    origin: Literal["direct", "replacement"] = "direct" if module is None else "replacement"
    info = FamilyBuildInfo(request, resolved, copy.deepcopy(config), origin, module_fqn,
                           tuple(allowed_prefixes), job.mesh, layout)
    result.__dict__[_INFO] = info  # plain data: not a submodule, parameter or buffer
    return result


def _constructor_arguments(resolved: ResolvedFamily, config: Any, module: nn.Module | None,
                           module_fqn: str, context: JobContext, where: str) -> dict[str, Any]:
    """Return the keywords for the constructor: request arguments, named selectors, runtime values."""
    named = explicit_parameters(resolved.constructor)
    needed = "config" if module is None else "module"
    if needed not in named:
        kind = "a direct build" if module is None else "a replacement"
        raise BuildError(f"{where}: {resolved.constructor.__qualname__} must explicitly accept "
                         f"'{needed}' for {kind}")
    kwargs = dict(resolved.arguments)
    # A selector reaches only a constructor that names it (e.g. a kernel choice
    # inside the variant); the others were consumed by selection.
    kwargs.update({n: v for n, v in resolved.selectors.items() if n in named})
    runtime = {"config": config, "module": module, "module_fqn": module_fqn, "context": context}
    kwargs.update({n: v for n, v in runtime.items() if n in named})
    return kwargs


# --------------------------------------------------------------------------
# Inspecting built models
# --------------------------------------------------------------------------


def get_family_build_info(module: nn.Module) -> FamilyBuildInfo | None:
    """Return the provenance build_family attached to `module`, or None for any other module."""
    info = module.__dict__.get(_INFO)
    return info if isinstance(info, FamilyBuildInfo) else None


def collect_family_modules(model: nn.Module) -> tuple[FamilyBoundary, ...]:
    """Return every built family in `model`, by identity, with all its paths (root and aliases)."""
    found: dict[int, tuple[nn.Module, list[str]]] = {}
    for fqn, module in model.named_modules(remove_duplicate=False):
        found.setdefault(id(module), (module, []))[1].append(fqn)
    boundaries = []
    for module, paths in found.values():
        info = get_family_build_info(module)
        if info is not None:
            boundaries.append(FamilyBoundary(module, tuple(paths), info))
    return tuple(boundaries)


def validate_family_context(model: nn.Module, context: ContextLike = None, *,
                            mesh: DeviceMesh | JobMesh | None = None) -> None:
    """Raise BuildError if any family of `model` was built for another job than this one."""
    job = job_context(mesh, context)
    for boundary in collect_family_modules(model):
        _validate_boundary(boundary, job)


def _compute_axes(family: FamilyIR) -> list[str]:
    """Return the axes among cp and ep that change what the family's modules compute.

    cp and ep change a module's compute and its collectives (tp and pp change
    only layouts); they matter to a family whose parallel axis or rules read them.
    """
    read: set[str] = {family.parallel} if family.parallel else set()
    for condition in [*(r.condition for r in family.requires), *(v.when for v in family.variants)]:
        if condition is not None:
            read |= names_in(condition)
    return [axis for axis in ("cp", "ep") if axis in read]


def _validate_boundary(boundary: FamilyBoundary, job: JobContext) -> None:
    info = boundary.info
    where = f"{', '.join(describe(p) for p in boundary.fqns)}: family '{info.resolved.family.name}'"
    built = info.resolved.axis_sizes
    if info.layout is not None and info.layout.sharded and info.layout.tp != job.size("tp"):
        raise BuildError(f"{where} was laid out for tp={info.layout.tp}, but the job has tp={job.size('tp')}; "
                         "build the model with the job's mesh")
    for axis in _compute_axes(info.resolved.family):
        if built.size(axis) != job.size(axis):
            raise BuildError(f"{where} was built for {axis}={built.size(axis)}, but the job has "
                             f"{axis}={job.size(axis)}; build the model with the job's mesh")
    if info.mesh is not None and job.mesh is not None and not info.mesh.same_job(job.mesh):
        raise BuildError(f"{where} was built on another job's mesh")
    try:
        again = resolve_family(info.request, job, module_fqn=boundary.fqns[0],
                               allowed_prefixes=info.allowed_prefixes)
    except ResolutionError as exc:
        raise BuildError(f"{exc.message} (the module was built as variant "
                         f"'{info.resolved.variant.name}')") from None
    if again.variant.name != info.resolved.variant.name:
        raise BuildError(f"{where} was built as variant '{info.resolved.variant.name}', but this job "
                         f"selects '{again.variant.name}'; build the model with the job's mesh")


__all__ = ["FamilyBoundary", "FamilyBuildInfo", "as_registry", "build_family", "collect_family_modules",
           "construct_family", "family_request", "get_family_build_info", "standard_registry",
           "validate_family_context"]
