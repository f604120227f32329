"""Axis sizes from contexts and DeviceMeshes: every validation rule, on fake and gloo meshes."""

from __future__ import annotations

import attrs
import pytest
from torch.distributed.device_mesh import init_device_mesh
from torch_support import process_group

from hpdsl.errors import ResolutionError
from hpdsl.torch.mesh import (
    AxisSizes, JobContext, JobMesh, as_job_mesh, axis_sizes_from_context, axis_sizes_from_mesh, job_context,
)


@pytest.fixture
def fake64():
    """A 64-rank fake process group (one process)."""
    with process_group(64, rank=5, fake=True):
        yield


def test_context_defaults_every_axis_to_one() -> None:
    assert axis_sizes_from_context(None) == AxisSizes(tp=1, cp=1, ep=1, pp=1, dp=1, etp=1)
    assert axis_sizes_from_context({"tp_size": 4, "ep": True, "ep_size": 8}) == AxisSizes(tp=4, ep=8)


@pytest.mark.parametrize("size", [True, False, 0, -2, 2.0, "2"])
def test_sizes_must_be_positive_ints_and_a_bool_is_not_one(size: object) -> None:
    with pytest.raises(ResolutionError, match=r"layers\.3: cp_size must be a positive int, found"):
        axis_sizes_from_context({"cp_size": size}, where="layers.3")


def test_an_active_axis_needs_its_size() -> None:
    with pytest.raises(ResolutionError, match="ep_size is required when ep is active"):
        axis_sizes_from_context({"ep": True})


def test_an_activity_flag_must_agree_with_the_size() -> None:
    with pytest.raises(ResolutionError, match="marks tp inactive, but tp_size is 2"):
        axis_sizes_from_context({"tp": False, "tp_size": 2})


def test_job_context_without_a_mesh_is_its_sizes() -> None:
    job = job_context(None, {"cp_size": 2, "dp_size": 8})
    assert job == JobContext(AxisSizes(cp=2, dp=8)) and job.mesh is None
    assert (job.size("cp"), job.active("cp"), job.active("tp"), job.local_rank("cp")) == (2, True, False, 0)
    assert job_context(None, job) is job  # already validated: passed through
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        job.sizes = AxisSizes()  # type: ignore[misc]  # frozen


def test_a_key_the_context_form_lacks_is_refused() -> None:
    with pytest.raises(ResolutionError, match=r"layers\.0: the context has no key 'tp_szie'; .*'tp_size'\?"):
        job_context(None, {"tp_szie": 2}, where="layers.0")


def test_sizes_are_read_from_a_64_rank_mesh(fake64: None) -> None:
    mesh = init_device_mesh("cpu", (4, 4, 4), mesh_dim_names=("tp", "cp", "ep"))
    assert axis_sizes_from_mesh(JobMesh(mesh)) == AxisSizes(tp=4, cp=4, ep=4)
    job = job_context(mesh, {"cp_size": 4})
    assert job.sizes == AxisSizes(tp=4, cp=4, ep=4)
    assert job.mesh is not None and job.mesh.device_mesh is mesh
    assert (job.local_rank("tp"), job.local_rank("cp")) == (0, 1)  # rank 5 of a 4×4×4 mesh: (0, 1, 1)
    assert job_context(job.mesh, job) is job
    with pytest.raises(ResolutionError, match="declares tp_size=1, but the mesh's 'tp' axis has size 4"):
        job_context(mesh, JobContext(AxisSizes(cp=4)))


def test_ep_is_read_from_the_expert_mesh_when_given(fake64: None) -> None:
    dense = init_device_mesh("cpu", (16, 4), mesh_dim_names=("dp", "tp"))
    experts = init_device_mesh("cpu", (8, 8), mesh_dim_names=("ep", "etp"))
    job = job_context(JobMesh(dense, experts), None)
    assert job.sizes == AxisSizes(dp=16, tp=4, ep=8, etp=8)


def test_the_mesh_and_the_declared_context_must_agree(fake64: None) -> None:
    mesh = init_device_mesh("cpu", (4, 16), mesh_dim_names=("tp", "cp"))
    with pytest.raises(ResolutionError, match=r"declares cp_size=2, but the mesh's 'cp' axis has size 16"):
        job_context(mesh, {"cp_size": 2}, where="layers.0.mixer")


def test_an_axis_larger_than_one_must_exist_on_the_mesh(fake64: None) -> None:
    mesh = init_device_mesh("cpu", (4, 16), mesh_dim_names=("tp", "dp"))
    with pytest.raises(ResolutionError, match=r"ep_size=4 needs a mesh axis named 'ep'; the mesh has axes"):
        job_context(mesh, {"ep_size": 4})
    # ...except pp: a pipeline stage's mesh never holds the pp axis.
    assert job_context(mesh, {"pp_size": 4}).size("pp") == 4
    assert job_context(mesh, {"ep_size": 1}).size("ep") == 1


def test_context_and_mesh_of_different_jobs_are_refused(fake64: None) -> None:
    first = init_device_mesh("cpu", (64,), mesh_dim_names=("cp",))
    second = init_device_mesh("cpu", (64,), mesh_dim_names=("cp",))
    with pytest.raises(ResolutionError, match="belong to different jobs"):
        job_context(second, {"mesh": JobMesh(first)})
    assert job_context(None, {"mesh": JobMesh(first)}).size("cp") == 64


def test_mesh_arguments_are_checked(fake64: None) -> None:
    mesh = init_device_mesh("cpu", (64,), mesh_dim_names=("ep",))
    with pytest.raises(ResolutionError, match="DeviceMesh or an hpdsl JobMesh, found str"):
        as_job_mesh("ep")  # type: ignore[arg-type]
    with pytest.raises(ResolutionError, match="expert mesh was given without"):
        as_job_mesh(None, mesh)
    assert as_job_mesh(mesh).expert_mesh is None


def test_a_one_process_gloo_mesh(tmp_path) -> None:
    with process_group(1, store_dir=tmp_path):
        mesh = init_device_mesh("cpu", (1, 1), mesh_dim_names=("cp", "ep"))
        job = JobMesh(mesh)
        assert axis_sizes_from_mesh(job) == AxisSizes()
        assert job.group("cp") is not None and job.group("tp") is None
        assert (job.local_rank("ep"), job.size("tp")) == (0, 1)


def test_the_mesh_supplies_the_size_of_an_axis_the_context_marks_active(fake64: None) -> None:
    mesh = init_device_mesh("cpu", (4, 16), mesh_dim_names=("tp", "ep"))
    assert job_context(mesh, {"ep": True}).size("ep") == 16
    with pytest.raises(ResolutionError, match="marks tp inactive, but tp_size is 4"):
        job_context(mesh, {"tp": False})
    with pytest.raises(ResolutionError, match="tp_size must be a positive int, found True"):
        job_context(mesh, {"tp_size": True})
