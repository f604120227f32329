"""Devices and clusters as .hpf data: the shipped catalog, files named by path, and the CLI naming its choices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cost_builders import device_text

from hpdsl.api import bind_model, compile_paths
from hpdsl.cost.facts.devices import UnknownDeviceError, get_device, get_machine
from hpdsl.cost.estimate import estimate
from hpdsl.model.strategy import Strategy
from hpdsl.cost.facts.machines import MachineCatalog, UnknownMachineError, shipped_files
from hpdsl.cost.formulas.kernels import curve_efficiency

ROOT = Path(__file__).resolve().parents[2]
LLAMA = ROOT / "examples" / "llama3_8b.hpf"

MY_DEVICE = device_text("my_gpu", "measured here", curve="256 0.3  4096 0.7", memory_bytes="25769803776",
                        memory_bandwidth="9.0e+11", memory_efficiency="0.8", peak_bf16="1.5e+14", peak_fp32=None,
                        intra_node_bandwidth="3.2e+10", inter_node_bandwidth="1.25e+10", devices_per_node="4")

MY_CLUSTER = """cluster my_rack {
  device = "h100_sxm"
  devices_per_node = 4
  source = "my rack"
  tier pcie { scope = "node" bandwidth = 3.2e+10 latency = 2.0e-06 all_reduce = 0.5 }
  tier eth { scope = "network" bandwidth = 1.25e+10 latency = 1.0e-05 }
}
"""


def test_the_shipped_devices_compile_and_cite_their_sources() -> None:
    registry = compile_paths(shipped_files(), stdlib=False)
    assert set(registry.devices) == {"a100_80gb", "h100_sxm", "h200", "b200", "mi300x", "ascend910b", "cpu"}
    assert set(registry.clusters) == {"dgx_a100", "dgx_h100"}
    for device in registry.devices.values():
        assert device.source_text and "bf16" in device.peak_flops
        assert all(0 < p.efficiency <= 1 for p in device.matmul)
        sizes = [p.size for p in device.matmul]
        assert sizes == sorted(sizes)
    for path in shipped_files():  # every number's citation is a comment beside it
        assert path.read_text().lstrip().startswith("//")


def test_short_names_reach_the_shipped_devices() -> None:
    assert get_device("a100").name == get_device("A100-80GB").name == "a100_80gb"
    assert get_device("h100").peak_flops == 989e12
    assert get_device("b200").memory_bytes == 180 * 1024**3


def test_an_unknown_device_names_every_choice() -> None:
    with pytest.raises(UnknownDeviceError) as caught:
        get_device("tpu9")
    for name in ("a100_80gb", "h100_sxm", "h200", "b200", "mi300x", "ascend910b", "cpu"):
        assert name in str(caught.value)


def test_a_cluster_prices_its_tiers(tmp_path: Path) -> None:
    (tmp_path / "rack.hpf").write_text(MY_CLUSTER)
    machine = MachineCatalog().machine(f"@{tmp_path / 'rack.hpf'}")
    assert machine.device.name == "h100_sxm" and machine.devices_per_node == 4
    assert machine.link_bandwidth("node") == 3.2e10 * 0.5
    assert machine.link_bandwidth("network") == 1.25e10
    shipped = get_machine("@dgx_a100")
    assert shipped.cluster is not None and shipped.link_bandwidth("node") == 3.0e11 * 0.77


def test_a_device_file_is_priced_and_named(tmp_path: Path) -> None:
    (tmp_path / "mine.hpf").write_text(MY_DEVICE)
    key = str(tmp_path / "mine.hpf")
    cost_model = bind_model([LLAMA])
    mine = estimate(cost_model, Strategy(tp=4, seq_len=1024, device=key))
    h100 = estimate(cost_model, Strategy(tp=4, seq_len=1024, device="h100"))
    assert mine.memory.capacity_bytes == 24 * 1024**3
    assert mine.step_time_s > h100.step_time_s  # a sixth of the peak, a ninth of the links
    assert mine.to_json()["machine"]["device"] == "my_gpu"
    assert mine.to_json()["machine"]["device_source"] == "measured here"


def test_a_file_without_a_cluster_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mine.hpf").write_text(MY_DEVICE)
    with pytest.raises(UnknownMachineError, match="declares 0 clusters"):
        MachineCatalog().machine(f"@{tmp_path / 'mine.hpf'}")


def test_the_curve_is_linear_between_points_and_flat_above() -> None:
    curve = ((100.0, 0.2), (200.0, 0.6))
    assert curve_efficiency(curve, 150.0) == pytest.approx(0.4)
    assert curve_efficiency(curve, 50.0) == pytest.approx(0.1)
    assert curve_efficiency(curve, 1e6) == 0.6


def _hpdsl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False, env=dict(os.environ))


def test_the_cli_names_what_it_assumed() -> None:
    run = _hpdsl("estimate", str(LLAMA), "--tp", "8", "--dp", "2", "--device", "a100", "--cluster", "dgx_a100",
                 "--mfu", "0", "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["machine"]["device"] == "a100_80gb" and out["machine"]["cluster"] == "dgx_a100"
    assert out["machine"]["device_file"] == "<hpdsl>/devices/a100.hpf"
    parts = out["time_breakdown"]
    assert parts["steady_s"] + parts["bubble_s"] + parts["after_backward_s"] == pytest.approx(out["step_time_s"])


def test_the_cli_lists_the_choices_of_an_unknown_cluster() -> None:
    run = _hpdsl("estimate", str(LLAMA), "--tp", "8", "--cluster", "dgx_a10")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "did you mean 'dgx_a100'" in run.stderr and "dgx_h100" in run.stderr
