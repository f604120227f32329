"""Axis sizes into a one-process stand-in job: a DeviceMesh over torch's fake process group.

`hpdsl explain` uses it to build a model "as rank 0 of a tp×cp×ep job" without the
job: collectives are never run, only resolution and construction (on the meta device).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from hpdsl.model.axes import STAGE_MESH_AXES, AxisSizes


@contextlib.contextmanager
def fake_job(axis_sizes: AxisSizes) -> Iterator[DeviceMesh | None]:
    """Yield a mesh of the stage axes (tp, cp, ep) larger than 1 (None: all are 1) in a fake process group."""
    sizes = {axis: axis_sizes.size(axis) for axis in STAGE_MESH_AXES if axis_sizes.active(axis)}
    if not sizes:
        yield None
        return
    if dist.is_initialized():
        raise RuntimeError("a process group is already initialised; explain needs its own")
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=math.prod(sizes.values()))
    try:
        yield init_device_mesh("cpu", tuple(sizes.values()), mesh_dim_names=tuple(sizes))
    finally:
        dist.destroy_process_group()
