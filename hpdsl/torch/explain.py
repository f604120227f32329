"""A built model and a module path into the story of that module: family, variant, rule, mesh, sources.

This backs `hpdsl explain`: for `layers.17.mixer` it says which family built
the module, which variant was chosen and by which clause, with which selector
values and mesh axis sizes, how its parameters are laid out over tp (logical
and local shapes), and where in the .hpf files each is declared.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from hpdsl.errors import UnknownNameError
from hpdsl.ir.nodes import SourceRef
from hpdsl.model.axes import CONDITION_AXES
from hpdsl.torch.build import FamilyBoundary, collect_family_modules


def explain_module(model: nn.Module, path: str) -> dict[str, Any]:
    """Return how the module at `path` was built (its nearest enclosing family when it is not one)."""
    try:
        target = model.get_submodule(path)
    except AttributeError:
        raise UnknownNameError(f"the model has no module '{path}'", "module", path) from None
    boundaries = collect_family_modules(model)
    by_identity = {id(b.module): b for b in boundaries}
    boundary = by_identity.get(id(target)) or _enclosing(boundaries, path)
    if boundary is None:
        inside = sorted(fqn for b in boundaries for fqn in b.fqns if _under(fqn, path))
        return {"path": path, "family": None, "module": type(target).__qualname__, "families_inside": inside}
    return {"path": path, **describe_boundary(boundary)}


def describe_boundary(boundary: FamilyBoundary) -> dict[str, Any]:
    """Return the provenance of one built family as plain data."""
    info = boundary.info
    resolved, family = info.resolved, info.resolved.family
    explicit = {n: v for n, v in info.request.arguments.items() if n in resolved.selectors}
    return {
        "family_path": boundary.fqns[0],
        "aliases": list(boundary.fqns[1:]),
        "family": family.name,
        "factory": family.factory,
        "variant": resolved.variant.name,
        "class": resolved.variant.path,
        "clause": resolved.clause,
        "selectors": dict(resolved.selectors),
        "explicit_selectors": explicit,
        "arguments": dict(resolved.arguments),
        "parallel_axis": family.parallel,
        "parallel": resolved.parallel,
        "mesh": resolved.axis_sizes.as_dict(CONDITION_AXES),
        "origin": info.origin,
        "layout": None if info.layout is None else {
            "tp": info.layout.tp,
            "parameters": {p.name: {"placement": p.placement, "dim": p.dim, "logical_shape": list(p.logical_shape),
                                    "local_shape": list(p.local_shape)} for p in info.layout.parameters},
        },
        "declared_at": {
            "family": _where(family.source),
            "variant": _where(resolved.variant.source),
            "selectors": {s.name: _where(s.source) for s in family.selectors},
            "requires": [{"message": r.message, "at": _where(r.source)} for r in family.requires],
        },
    }


def _enclosing(boundaries: tuple[FamilyBoundary, ...], path: str) -> FamilyBoundary | None:
    best: tuple[int, FamilyBoundary] | None = None
    for boundary in boundaries:
        for fqn in boundary.fqns:
            if _under(path, fqn) and (best is None or len(fqn) > best[0]):
                best = (len(fqn), boundary)
    return None if best is None else best[1]


def _under(path: str, prefix: str) -> bool:
    return prefix == "" or path == prefix or path.startswith(prefix + ".")


def _where(source: SourceRef | None) -> str | None:
    return None if source is None else f"{source.file}:{source.line}:{source.col}"


__all__ = ["describe_boundary", "explain_module"]
