"""Accelerators as data: a device name into its memory, peak FLOP/s and link bandwidths.

Figures are vendor datasheet values for dense (not 2:4 sparse) bf16/fp16 matmul
throughput and the HBM capacity the strategy search fits memory against. Link
bandwidths are per device and per direction (a collective's ring moves bytes one
way per link), so a datasheet's bidirectional NVLink figure is halved here. The
scale-out figure is one NIC per device, the usual 8-device node. Everything the
estimator does with a device is linear in these numbers: replace them with
measured ones for real planning.
"""

from __future__ import annotations

import attrs

from hpdsl.diagnostics import did_you_mean
from hpdsl.errors import InputError

GIB = 1024**3
GB = 1000**3


@attrs.frozen
class Device:
    """One accelerator: memory, dense bf16 peak, intra-node and inter-node bandwidth per direction."""

    name: str
    memory_bytes: int
    peak_flops: float
    intra_node_bandwidth: float   # bytes/s per device and direction (NVLink, Infinity Fabric, HCCS)
    inter_node_bandwidth: float   # bytes/s per device and direction (one NIC per device)
    devices_per_node: int = 8
    source: str = ""


@attrs.frozen(auto_exc=True)
class UnknownDeviceError(InputError):
    """A strategy names a device the table does not hold."""


H100 = Device(
    "h100", 80 * GIB, 989e12, 450 * GB, 50 * GB, 8,
    source="NVIDIA H100 SXM5 datasheet: 80 GB HBM3 (five 16 GiB stacks), 989 TFLOP/s dense bf16, "
           "NVLink 4 900 GB/s bidirectional; ConnectX-7 400 Gb/s per GPU (assumed)")
H200 = Device(
    "h200", 141 * GIB, 989e12, 450 * GB, 50 * GB, 8,
    source="NVIDIA H200 SXM datasheet: 141 GB HBM3e (taken as GiB, as the brief states it; "
           "nvidia-smi reports about 140 GiB usable), same GH100 compute and NVLink 4 as H100; "
           "400 Gb/s NIC per GPU (assumed)")
A100 = Device(
    "a100", 80 * GIB, 312e12, 300 * GB, 25 * GB, 8,
    source="NVIDIA A100 SXM4 80GB datasheet: 312 TFLOP/s dense bf16, NVLink 3 600 GB/s "
           "bidirectional; HDR 200 Gb/s NIC per GPU (assumed)")
MI300X = Device(
    "mi300x", 192 * GIB, 1307.4e12, 448 * GB, 50 * GB, 8,
    source="AMD Instinct MI300X datasheet: 192 GB HBM3, 1307.4 TFLOP/s dense bf16, seven "
           "Infinity Fabric links of 64 GB/s per direction; 400 Gb/s NIC per GPU (assumed)")
ASCEND_910B = Device(
    "ascend910b", 64 * GIB, 313e12, 196 * GB, 25 * GB, 8,
    source="Huawei Ascend 910B (910B3): 64 GB HBM2e, about 313 TFLOP/s dense fp16/bf16, HCCS "
           "7 x 56 GB/s bidirectional within an 8-NPU node; 200 Gb/s RoCE per NPU (assumed)")

DEVICES: dict[str, Device] = {d.name: d for d in (H100, H200, A100, MI300X, ASCEND_910B)}
"""The shipped devices by name."""


def get_device(name: str) -> Device:
    """Return the shipped device `name` (case-insensitive); raise UnknownDeviceError if unknown."""
    found = DEVICES.get(name)  # the common case: a device's own name
    if found is not None:
        return found
    key = name.lower().replace("-", "").replace("_", "").replace(" ", "")
    aliases = {"h100sxm": "h100", "910b": "ascend910b", "ascend": "ascend910b", "a10080gb": "a100"}
    key = aliases.get(key, key)
    if key not in DEVICES:
        raise UnknownDeviceError(f"unknown device '{name}'; {did_you_mean(name.lower(), DEVICES)}")
    return DEVICES[key]
