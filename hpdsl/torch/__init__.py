"""hpdsl's torch backend: resolve module families against a DeviceMesh, build modules and whole models.

The only part of hpdsl that imports torch. Typical use by an embedding library:

    from hpdsl import load_registry
    from hpdsl.torch import build_family, build_model

    registry = load_registry("registry.json")
    attention = build_family("attention", config=cfg, mesh=mesh, registry=registry,
                             module_fqn="layers.3.mixer", layer_index=3)
    model = build_model("qwen3_next_80b_a3b", mesh, registry=registry, device="meta")

A family that declares a tensor-parallel layout is sharded over the mesh's tp
axis as it is built (hpdsl/torch/layout.py); `get_family_build_info(module).layout`
records every parameter's logical and local shape.
"""

from hpdsl.torch.build import (
    FamilyBoundary, FamilyBuildInfo, build_family, collect_family_modules, construct_family,
    family_request, get_family_build_info, standard_registry, validate_family_context,
)
from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.explain import explain_module
from hpdsl.torch.layout import AppliedLayout, ParameterLayout, TensorParallel, apply_layout
from hpdsl.torch.mesh import (
    AxisSizes, JobContext, JobMesh, axis_sizes_from_context, axis_sizes_from_mesh, job_context,
)
from hpdsl.torch.model import build_model, config_selectors, materialize
from hpdsl.torch.parallelize import parallelize, train_mesh
from hpdsl.torch.resolve import DEFAULT_PREFIXES, FamilyRequest, ResolvedFamily, resolve_family

__all__ = ["DEFAULT_PREFIXES", "AppliedLayout", "AxisSizes", "FamilyBoundary", "FamilyBuildInfo",
           "FamilyRequest", "JobContext", "JobMesh", "ModuleConfig", "ParameterLayout", "ResolvedFamily",
           "TensorParallel", "apply_layout", "axis_sizes_from_context", "axis_sizes_from_mesh", "build_family",
           "build_model", "collect_family_modules", "config_selectors", "construct_family", "explain_module",
           "family_request",
           "get_family_build_info", "job_context", "materialize", "parallelize", "resolve_family",
           "standard_registry", "train_mesh", "validate_family_context"]
