"""A machine key (a device, or a device in a cluster) into the facts pricing reads today.

The devices and clusters themselves are .hpf data (devices/*.hpf, each number
cited there), compiled by hpdsl/cost/facts/machines.py. This module keeps the
view the pricing reads: memory, dense bf16 peak, and one bandwidth within a
node and one across (per device and direction). Without a cluster those are the
device's own link facts; with one, its tiers' bandwidth times their all-reduce
efficiency.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs

from hpdsl.cost.facts.machines import ALIASES, CATALOG, Machine, UnknownMachineError, normal, unknown_message
from hpdsl.cost.facts.precision import PRECISIONS
from hpdsl.errors import InputError
from hpdsl.model.machine import COLLECTIVES, SCOPES

GIB = 1024**3
GB = 1000**3


@attrs.frozen
class Device:
    """One accelerator as pricing reads it: memory, dense bf16 peak, intra-node and inter-node bandwidth."""

    name: str
    memory_bytes: int
    peak_flops: float
    intra_node_bandwidth: float   # bytes/s per device and direction (NVLink, Infinity Fabric, HCCS)
    inter_node_bandwidth: float   # bytes/s per device and direction (one NIC per device)
    devices_per_node: int = 8
    source: str = ""


@attrs.frozen(auto_exc=True)
class UnknownDeviceError(InputError):
    """A strategy names a device the catalog does not hold."""


def device_of(machine: Machine) -> Device:
    """Return the pricing view of `machine`."""
    d = machine.device
    source = d.source_text if machine.cluster is None else f"{d.source_text}; {machine.cluster.source_text}"
    return Device(d.name, d.memory_bytes, d.peak_flops["bf16"], machine.link_bandwidth("node"),
                  machine.link_bandwidth("network"), machine.devices_per_node, source)


def get_machine(name: str) -> Machine:
    """Return the machine of key `name`; raise UnknownDeviceError listing the choices if unknown."""
    try:
        return CATALOG.machine(name)
    except UnknownMachineError as error:
        if "@" in name or name.endswith(".hpf"):
            raise UnknownDeviceError(str(error)) from None
        aliases = [a for a in ALIASES if normal(a) in CATALOG.device_names()]
        raise UnknownDeviceError(unknown_message(name, "device", CATALOG.device_names(), aliases)) from None


def unknown_device_reason(name: str) -> str:
    """Return why machine key `name` is unknown, listing the choices ("" if it is known)."""
    try:
        get_machine(name)
    except UnknownDeviceError as error:
        return str(error)
    return ""


def device_facts(name: str) -> tuple[float, tuple[tuple[float, float], ...]]:
    """Return what the device time model reads of machine `name`: bandwidth·efficiency and the matmul curve."""
    d = get_machine(name).device
    return d.memory_bandwidth * d.memory_efficiency, tuple((p.size, p.efficiency) for p in d.matmul)


def attention_curve(name: str) -> tuple[tuple[float, float], ...]:
    """Return machine `name`'s attention-kernel curve: its own where it declares one, else its matmul curve."""
    d = get_machine(name).device
    return tuple((p.size, p.efficiency) for p in (d.attention or d.matmul))


def dtype_peak(name: str, dtype: str) -> tuple[str, float]:
    """Return the dtype whose dense peak machine `name` states for `dtype`, and that peak: bf16's where it states none.

    A device need state only its bf16 peak (hpdsl/model/machine.py PEAK_DTYPES); the
    fallback is named in every estimate's `machine` section, so a missing fp8 or fp32
    peak is never assumed silently.
    """
    peaks = get_machine(name).device.peak_flops
    return (dtype, peaks[dtype]) if dtype in peaks else ("bf16", peaks["bf16"])


def precision_peaks(name: str, precision: str) -> tuple[tuple[str, float], tuple[str, float]]:
    """Return the (dtype, peak) machine `name` prices precision `precision`'s layer weight matmuls and the rest at."""
    recipe = PRECISIONS[precision]
    return dtype_peak(name, recipe.matmul), dtype_peak(name, recipe.scores)


HOST_FACTS = ("op_overhead", "opt_bw", "tensor", "dtensor", "dtensor_op", "shard", "overlap", "call", "eager_bw")
"""What host_facts returns, in order: the names the pricing contexts keep them under."""


def host_facts(name: str) -> tuple[float, ...]:
    """Return machine `name`'s host facts, as HOST_FACTS names them (op_overhead 0: the host term is not priced).

    Host seconds per op (plain, and under tp through DTensor), the optimizer's bytes/s, host
    seconds per parameter tensor (plain, DTensor) and per FSDP2 unit and micro-batch, and the
    share of an overlapped collective that hides behind compute; host seconds per eager aten call and
    the bytes/s eager elementwise kernels move (hpdsl/cost/facts/eager.py).
    """
    d = get_machine(name).device
    return (d.op_overhead, d.optimizer_bandwidth or d.memory_bandwidth * d.memory_efficiency, d.tensor_overhead,
            d.dtensor_overhead or d.tensor_overhead, d.dtensor_op_overhead or d.op_overhead, d.shard_overhead,
            d.comm_overlap, d.call_overhead, d.eager_bandwidth or d.memory_bandwidth * d.memory_efficiency)


def link_facts(name: str) -> dict[str, float]:
    """Return what the device time model reads of machine `name`'s links, per scope (node, network).

    `{scope}_{collective}`: bytes/s each collective reaches (the tier's bandwidth times its
    efficiency; without a cluster the device's link, every collective alike); `{scope}_latency`:
    seconds per message step (0 without a cluster); `{scope}_tree`: 1 where the all-reduce is a tree.
    """
    machine = get_machine(name)
    out: dict[str, float] = {}
    for scope in SCOPES:
        out.update({f"{scope}_{c}": machine.link_bandwidth(scope, c) for c in COLLECTIVES})
        out[f"{scope}_latency"] = machine.latency(scope)
        out[f"{scope}_tree"] = float(machine.tree_all_reduce(scope))
    return out


def get_device(name: str) -> Device:
    """Return the pricing view of machine key `name` (a shipped device, case-insensitive, or a file)."""
    return device_of(get_machine(name))


class _Shipped(Mapping[str, Device]):
    """The shipped devices by name, compiled on first use (so importing the cost model stays light)."""

    def __getitem__(self, name: str) -> Device:
        if name not in CATALOG.device_names():
            raise KeyError(name)
        return get_device(name)

    def __iter__(self) -> Iterator[str]:
        return iter(CATALOG.device_names())

    def __len__(self) -> int:
        return len(CATALOG.device_names())


DEVICES: Mapping[str, Device] = _Shipped()
"""The shipped devices by name."""
