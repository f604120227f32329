"""The parallel axes, once: their names, a job's validated sizes, and what family conditions read.

Every stage that talks about axes reads them here: the checker (which names a
condition may use, hpdsl/check/coverage.py), the estimator (a family's requires
over a strategy grid, hpdsl/cost/feasibility/rules.py) and the torch backend (a job's
mesh, hpdsl/torch/mesh.py; resolution, hpdsl/torch/resolve.py). The inputs a
condition is evaluated on are built by `condition_inputs` alone, so what the
checker proves about a family is what resolution and the estimator do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import attrs

from hpdsl.errors import HpdslError
from hpdsl.model.fields import Scalar

if TYPE_CHECKING:  # a type only: the model layer sits below the IR
    from hpdsl.ir.nodes import FamilyIR

CONDITION_AXES = ("tp", "cp", "ep", "pp", "etp")
"""The axes a family condition may name, in the order parallelisms are applied; `parallel` is
the family's own axis > 1."""

STRATEGY_AXES = ("dp", "tp", "cp", "ep", "etp", "pp")
"""Every axis of a parallel strategy (hpdsl/model/strategy.py): dp·tp·cp·pp devices, with ep·etp
carved out of dp·cp·tp for the expert layers."""

EXPERT_AXES = ("ep", "etp")
"""The axes of the expert layers' own mesh (Megatron's expert mesh), carved out of dp·cp·tp."""

STAGE_MESH_AXES = ("tp", "cp", "ep")
"""The axes a pipeline stage's DeviceMesh must hold when they split the job: what modules run
collectives over. pp is a schedule (stages are separate meshes); dp and etp may be named otherwise."""


@attrs.frozen(auto_exc=True)
class AxisSizeError(HpdslError):
    """An axis degree is not a positive int, or the degrees do not fit the job's devices."""

    axis: str = ""
    value: object = None


def _degree(instance: object, attribute: attrs.Attribute, value: object) -> None:
    # `type(...) is int` on purpose: a bool is an int to isinstance, never a degree.
    if type(value) is not int or value < 1:
        raise AxisSizeError(f"the {attribute.name} degree must be an int >= 1, found {value!r} "
                            f"({type(value).__name__}); give every parallel degree as a positive int",
                            attribute.name, value)


@attrs.frozen(kw_only=True)
class AxisSizes:
    """The degree of every parallel axis of a job; 1 where the job does not split it.

    Validated on construction (each an int >= 1), before any mesh exists, the way
    a job's parallel dimensions are checked before its mesh is built.
    """

    tp: int = attrs.field(default=1, validator=_degree)
    cp: int = attrs.field(default=1, validator=_degree)
    ep: int = attrs.field(default=1, validator=_degree)
    pp: int = attrs.field(default=1, validator=_degree)
    dp: int = attrs.field(default=1, validator=_degree)
    etp: int = attrs.field(default=1, validator=_degree)

    def size(self, axis: str) -> int:
        """Return the degree of `axis` (one of STRATEGY_AXES)."""
        if axis not in STRATEGY_AXES:
            raise AxisSizeError(f"unknown parallel axis {axis!r}; the axes are {', '.join(STRATEGY_AXES)}",
                                axis, None)
        return int(getattr(self, axis))

    def active(self, axis: str) -> bool:
        """Return whether `axis` splits the job (degree > 1)."""
        return self.size(axis) > 1

    def as_dict(self, axes: Iterable[str] = STRATEGY_AXES) -> dict[str, int]:
        """Return {axis: degree} for `axes` (every axis by default; CONDITION_AXES is what conditions read)."""
        return {axis: self.size(axis) for axis in axes}

    def validate_world(self, world_size: int) -> None:
        """Raise AxisSizeError unless the degrees fit `world_size` devices as a Strategy's do.

        The rules of hpdsl/cost/feasibility/rules.py: dp·tp·pp·cp is the device count, and
        ep·etp divides dp·cp·tp (the devices of a stage's expert layers).
        """
        devices = self.dp * self.tp * self.pp * self.cp
        if devices != world_size:
            raise AxisSizeError(f"dp·tp·pp·cp = {devices}, but the job has {world_size} devices",
                                "dp·tp·pp·cp", devices)
        expert, dense = self.ep * self.etp, self.dp * self.cp * self.tp
        if dense % expert:
            raise AxisSizeError(f"ep·etp = {expert} does not divide dp·cp·tp = {dense} "
                                "(the devices of a stage's expert layers)", "ep·etp", expert)


def with_parallel(values: Mapping[str, Scalar], parallel_axis: str | None) -> dict[str, Scalar]:
    """Return `values` plus `parallel`: whether the family's axis (read from `values`, 1 when absent) is > 1."""
    env = dict(values)
    env["parallel"] = parallel_axis is not None and int(values.get(parallel_axis, 1)) > 1
    return env


def selector_defaults(family: FamilyIR) -> dict[str, Scalar]:
    """Return {selector: default} for every selector of `family` that declares one."""
    return {s.name: s.default for s in family.selectors if s.default is not None}


def config_selectors(family: FamilyIR, config: object) -> dict[str, Scalar]:
    """Return the family's selectors named like a config field, at the config's value (`norm`, `qk_norm_full`).

    A selector that shares a field's name follows the model: the norm family picks
    LayerNorm for `norm layernorm`, and a require over such a selector judges the
    model's value, in the build and in the strategy checks alike.
    """
    chosen: dict[str, Scalar] = {}
    for selector in family.selectors:
        value = getattr(config, selector.name, None)
        if selector.type == "enum" and value in selector.values:
            chosen[selector.name] = value
        elif selector.type == "bool" and isinstance(value, bool):
            chosen[selector.name] = value
    return chosen


def condition_inputs(family: FamilyIR, sizes: AxisSizes, selectors: Mapping[str, Scalar]) -> dict[str, Scalar]:
    """Return what `family`'s conditions read: selector defaults, `selectors` over them, the axes, `parallel`."""
    return with_parallel({**selector_defaults(family), **selectors, **sizes.as_dict(CONDITION_AXES)},
                         family.parallel)


__all__ = ["CONDITION_AXES", "EXPERT_AXES", "STAGE_MESH_AXES", "STRATEGY_AXES", "AxisSizeError", "AxisSizes",
           "condition_inputs", "config_selectors", "selector_defaults", "with_parallel"]
