"""A DeviceMesh and a declared job context into validated axis sizes (tp, cp, ep, pp).

The job's mesh is borrowed, never copied: `JobMesh` pairs the dense
DeviceMesh with an optional expert mesh, from which the ep axis is read
when given (expert parallelism often folds data-parallel ranks into its own
view). A declared context is a mapping in the upstream form: `<axis>_size`
ints and `<axis>` activity flags. Sizes are validated before any module is
built, so a job that cannot be met fails here rather than at sharding time.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs
from torch.distributed import ProcessGroup
from torch.distributed.device_mesh import DeviceMesh

from hpdsl.errors import ResolutionError

AXES = ("tp", "cp", "ep", "pp")
"""The mesh axes a family rule may read, in the order parallelisms are applied."""

# pp is the one axis that may be larger than 1 without a mesh axis: pipeline
# stages are separate meshes, so a stage's own mesh never holds a pp axis.
_MAY_BE_ABSENT = frozenset({"pp"})


@attrs.frozen
class AxisSizes:
    """The size of every parallel axis of a job; 1 where the job does not use it."""

    tp: int = 1
    cp: int = 1
    ep: int = 1
    pp: int = 1

    def size(self, axis: str) -> int:
        """Return the size of `axis` (one of tp, cp, ep, pp)."""
        return int(getattr(self, axis))

    def active(self, axis: str) -> bool:
        """Return whether `axis` splits the job (size > 1)."""
        return self.size(axis) > 1

    def as_dict(self) -> dict[str, int]:
        """Return {axis: size}, the form conditions read."""
        return {axis: self.size(axis) for axis in AXES}


@attrs.frozen(eq=False)
class JobMesh:
    """A job's DeviceMesh and its optional expert mesh (the ep axis is read from the latter)."""

    device_mesh: DeviceMesh
    expert_mesh: DeviceMesh | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> JobMesh:
        # Borrowed, never copied: a copied module runs on the same job.
        return self

    def axis_mesh(self, axis: str) -> DeviceMesh | None:
        """Return the one-axis sub-mesh of `axis`, or None when the mesh has no such axis."""
        region = self.expert_mesh if axis == "ep" and self.expert_mesh is not None else self.device_mesh
        return region[axis] if axis in axis_names(region) else None

    def group(self, axis: str) -> ProcessGroup | None:
        """Return the process group of `axis`, or None when the mesh has no such axis."""
        sub = self.axis_mesh(axis)
        return None if sub is None else sub.get_group()

    def size(self, axis: str) -> int:
        """Return the size of `axis` on the mesh, 1 when the mesh has no such axis."""
        sub = self.axis_mesh(axis)
        return 1 if sub is None else sub.size()

    def local_rank(self, axis: str) -> int:
        """Return this rank's coordinate along `axis`, 0 when the mesh has no such axis."""
        sub = self.axis_mesh(axis)
        return 0 if sub is None else sub.get_local_rank()

    def names(self, axis: str) -> tuple[str, ...]:
        """Return the axis names of the mesh `axis` is read from."""
        region = self.expert_mesh if axis == "ep" and self.expert_mesh is not None else self.device_mesh
        return axis_names(region)

    def same_job(self, other: JobMesh) -> bool:
        """Return whether `other` borrows the very same meshes."""
        return self.device_mesh is other.device_mesh and self.expert_mesh is other.expert_mesh


def axis_names(mesh: DeviceMesh) -> tuple[str, ...]:
    """Return a DeviceMesh's axis names (empty for an unnamed mesh)."""
    return tuple(mesh.mesh_dim_names or ())


def as_job_mesh(mesh: DeviceMesh | JobMesh | None, expert_mesh: DeviceMesh | None = None) -> JobMesh | None:
    """Return `mesh` as a JobMesh (None stays None); raise ResolutionError for anything else."""
    if mesh is None:
        if expert_mesh is not None:
            raise ResolutionError("an expert mesh was given without the job's DeviceMesh")
        return None
    if isinstance(mesh, JobMesh):
        if expert_mesh is not None and expert_mesh is not mesh.expert_mesh:
            raise ResolutionError("an expert mesh was given twice: in the JobMesh and beside it")
        return mesh
    if isinstance(mesh, DeviceMesh):
        return JobMesh(mesh, expert_mesh)
    raise ResolutionError(f"mesh must be a torch DeviceMesh or an hpdsl JobMesh, found {type(mesh).__name__}")


def axis_sizes_from_context(context: Mapping[str, Any] | None, *, where: str = "<root>") -> AxisSizes:
    """Read and validate the axis sizes a context declares; raise ResolutionError naming `where`."""
    context = context or {}
    sizes = {}
    for axis in AXES:
        size = context.get(f"{axis}_size")
        flag = context.get(axis)
        if size is None:
            if flag:
                raise ResolutionError(f"{where}: {axis}_size is required when {axis} is active")
            size = 1
        _check_size(axis, size, where)
        if isinstance(flag, bool) and flag != (size > 1):
            state = "active" if flag else "inactive"
            raise ResolutionError(f"{where}: the context marks {axis} {state}, but {axis}_size is {size}")
        sizes[axis] = size
    return AxisSizes(**sizes)


def axis_sizes_from_mesh(mesh: JobMesh) -> AxisSizes:
    """Read every axis size from a job mesh (ep from its expert mesh when it has one)."""
    return AxisSizes(**{axis: mesh.size(axis) for axis in AXES})


def job_context(mesh: DeviceMesh | JobMesh | None, context: Mapping[str, Any] | None,
                *, where: str = "<root>") -> Mapping[str, Any]:
    """Merge a mesh and a declared context into one validated, read-only job context.

    The result holds the caller's keys, then `<axis>_size` and `<axis>` for every
    axis and `mesh` (a JobMesh or None). Sizes read from the mesh must agree with
    the ones the context declares; an axis declared larger than 1 must exist on the
    mesh (pp excepted); a context carrying another job's mesh is refused.
    """
    result = dict(context or {})
    job = as_job_mesh(mesh if mesh is not None else _context_mesh(result, where))
    if job is not None:
        previous = _context_mesh(result, where)
        if previous is not None and not previous.same_job(job):
            raise ResolutionError(f"{where}: the context and the mesh belong to different jobs")
        result.update(_mesh_sizes(job, result, where))
    sizes = axis_sizes_from_context(result, where=where)
    for axis in AXES:
        result[f"{axis}_size"] = sizes.size(axis)
        result[axis] = sizes.active(axis)
    result["mesh"] = job
    return MappingProxyType(result)


def _context_mesh(context: Mapping[str, Any], where: str) -> JobMesh | None:
    try:
        return as_job_mesh(context.get("mesh"))
    except ResolutionError as exc:
        raise ResolutionError(f"{where}: the context's {exc.message}") from None


def _mesh_sizes(job: JobMesh, context: Mapping[str, Any], where: str) -> dict[str, int]:
    """Return `<axis>_size` of every axis the mesh has, checked against what the context declares."""
    sizes = {}
    for axis in AXES:
        stated = context.get(f"{axis}_size")
        if stated is not None:
            _check_size(axis, stated, where)
        if axis in job.names(axis):
            actual = job.size(axis)
            if stated is not None and stated != actual:
                raise ResolutionError(f"{where}: the context declares {axis}_size={stated}, "
                                      f"but the mesh's {axis!r} axis has size {actual}")
            sizes[f"{axis}_size"] = actual
        elif stated is not None and stated > 1 and axis not in _MAY_BE_ABSENT:
            raise ResolutionError(f"{where}: {axis}_size={stated} needs a mesh axis named "
                                  f"{axis!r}; the mesh has axes {job.names(axis)!r}")
    return sizes


def _check_size(axis: str, size: object, where: str) -> None:
    # `type(...) is int` on purpose: a bool is an int to isinstance, never a size here.
    if type(size) is not int or size < 1:
        raise ResolutionError(f"{where}: {axis}_size must be a positive int, found {size!r}")


__all__ = ["AXES", "AxisSizes", "JobMesh", "as_job_mesh", "axis_names", "axis_sizes_from_context",
           "axis_sizes_from_mesh", "job_context"]
