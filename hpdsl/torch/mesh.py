"""A DeviceMesh and a declared job context into one validated JobContext: the mesh and the axis sizes.

The job's mesh is borrowed, never copied: `JobMesh` pairs the dense
DeviceMesh with an optional expert mesh, from which the expert axes (ep, etp)
are read when given (expert parallelism often folds data-parallel ranks into
its own view). A declared context is a mapping in the upstream form:
`<axis>_size` ints and `<axis>` activity flags for the axes of
hpdsl/model/axes.py, and optionally `mesh`. It is validated into a JobContext
once, at the public boundary, so a job that cannot be met fails here rather
than at sharding time; everything past the boundary reads the frozen value.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Union

import attrs
from torch.distributed import ProcessGroup
from torch.distributed.device_mesh import DeviceMesh

from hpdsl.errors import ResolutionError
from hpdsl.model.axes import EXPERT_AXES, STAGE_MESH_AXES, STRATEGY_AXES, AxisSizeError, AxisSizes

_CONTEXT_KEYS = ("mesh", *(f"{axis}_size" for axis in STRATEGY_AXES), *STRATEGY_AXES)


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
        region = self._region(axis)
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
        return axis_names(self._region(axis))

    def _region(self, axis: str) -> DeviceMesh:
        return self.expert_mesh if axis in EXPERT_AXES and self.expert_mesh is not None else self.device_mesh

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


def axis_sizes_from_mesh(mesh: JobMesh) -> AxisSizes:
    """Read every axis size from a job mesh (the expert axes from its expert mesh when it has one)."""
    return AxisSizes(**{axis: mesh.size(axis) for axis in STRATEGY_AXES})


@attrs.frozen
class JobContext:
    """What a job is to the modules built for it: its axis sizes and its mesh (None: no mesh, one process).

    The mesh, when there is one, agrees with the sizes: every axis it holds has
    its size, and every stage-mesh axis (tp, cp, ep) larger than 1 is on it.
    """

    sizes: AxisSizes = AxisSizes()
    mesh: JobMesh | None = None

    def __attrs_post_init__(self) -> None:
        if self.mesh is not None:
            _check_mesh(self.mesh, self.sizes.as_dict(), "<root>")

    def __deepcopy__(self, memo: dict[int, Any]) -> JobContext:
        # Immutable, and the mesh is borrowed: a copied module runs on the same job.
        return self

    def size(self, axis: str) -> int:
        """Return the size of `axis` in this job."""
        return self.sizes.size(axis)

    def active(self, axis: str) -> bool:
        """Return whether `axis` splits this job (size > 1)."""
        return self.sizes.active(axis)

    def local_rank(self, axis: str) -> int:
        """Return this rank's coordinate along `axis`, 0 without a mesh or when the axis is not split."""
        return self.mesh.local_rank(axis) if self.mesh is not None and self.active(axis) else 0


ContextLike = Union[JobContext, Mapping[str, Any], None]
"""What the public functions take as `context`: a JobContext, or a mapping in the upstream form."""


def job_context(mesh: DeviceMesh | JobMesh | None, context: ContextLike, *, where: str = "<root>") -> JobContext:
    """Validate a mesh and a declared context into one JobContext; raise ResolutionError naming `where`.

    Sizes read from the mesh must agree with the ones the context declares; an
    axis declared larger than 1 must exist on the mesh (tp, cp and ep; a stage's
    mesh never holds pp); a context carrying another job's mesh is refused, and
    so is a key the context form does not have.
    """
    if isinstance(context, JobContext):
        job = as_job_mesh(mesh)
        if job is None or (context.mesh is not None and context.mesh.same_job(job)):
            return context
        context = {"mesh": context.mesh, **{f"{a}_size": context.size(a) for a in STRATEGY_AXES}}
    stated = dict(context or {})
    _check_keys(stated, where)
    previous = _context_mesh(stated, where)
    job = as_job_mesh(mesh) if mesh is not None else previous
    if job is not None and previous is not None and not previous.same_job(job):
        raise ResolutionError(f"{where}: the context and the mesh belong to different jobs")
    known = _declared_sizes(stated, where)
    if job is not None:
        _check_mesh(job, known, where)
        known = {**{a: job.size(a) for a in STRATEGY_AXES if a in job.names(a)}, **known}
    _check_flags(stated, known, where)
    return JobContext(AxisSizes(**known), job)


def axis_sizes_from_context(context: ContextLike, *, where: str = "<root>") -> AxisSizes:
    """Read and validate the axis sizes a context declares; raise ResolutionError naming `where`."""
    return job_context(None, context, where=where).sizes


def _check_keys(context: Mapping[str, Any], where: str) -> None:
    for key in context:
        if key not in _CONTEXT_KEYS:
            close = difflib.get_close_matches(str(key), _CONTEXT_KEYS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ResolutionError(f"{where}: the context has no key {key!r}; it takes <axis>_size and <axis> "
                                  f"for the axes {', '.join(STRATEGY_AXES)}, and mesh{hint}")


def _context_mesh(context: Mapping[str, Any], where: str) -> JobMesh | None:
    try:
        return as_job_mesh(context.get("mesh"))
    except ResolutionError as exc:
        raise ResolutionError(f"{where}: the context's {exc.message}") from None


def _declared_sizes(context: Mapping[str, Any], where: str) -> dict[str, int]:
    """Return the `<axis>_size` values the context states, each a valid degree."""
    sizes = {}
    for axis in STRATEGY_AXES:
        size = context.get(f"{axis}_size")
        if size is not None:
            try:
                AxisSizes(**{axis: size})
            except AxisSizeError:
                raise ResolutionError(f"{where}: {axis}_size must be a positive int, found {size!r}") from None
            sizes[axis] = size
    return sizes


def _check_mesh(job: JobMesh, declared: Mapping[str, int], where: str) -> None:
    """Raise ResolutionError if a declared size disagrees with the mesh, or a split stage axis is missing."""
    for axis, stated in declared.items():
        if axis in job.names(axis):
            actual = job.size(axis)
            if stated != actual:
                raise ResolutionError(f"{where}: the context declares {axis}_size={stated}, "
                                      f"but the mesh's {axis!r} axis has size {actual}")
        elif stated > 1 and axis in STAGE_MESH_AXES:
            raise ResolutionError(f"{where}: {axis}_size={stated} needs a mesh axis named "
                                  f"{axis!r}; the mesh has axes {job.names(axis)!r}")


def _check_flags(context: Mapping[str, Any], known: Mapping[str, int], where: str) -> None:
    """Raise ResolutionError if an `<axis>` flag has no size to go with it or disagrees with its size."""
    for axis in STRATEGY_AXES:
        flag, size = context.get(axis), known.get(axis)
        if flag and size is None:
            raise ResolutionError(f"{where}: {axis}_size is required when {axis} is active")
        if isinstance(flag, bool) and flag != ((size or 1) > 1):
            state = "active" if flag else "inactive"
            raise ResolutionError(f"{where}: the context marks {axis} {state}, but {axis}_size is {size or 1}")


__all__ = ["AxisSizes", "ContextLike", "JobContext", "JobMesh", "as_job_mesh", "axis_names",
           "axis_sizes_from_context", "axis_sizes_from_mesh", "job_context"]
