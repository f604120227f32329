"""A device and cluster given by name or .hpf file into the Machine a strategy is priced on.

A machine key is `DEVICE`, `DEVICE@CLUSTER` or `@CLUSTER` (the cluster's own
device), each part a shipped name (devices/*.hpf, aliases such as `a100` or
`h100` included) or a path to a .hpf file declaring it. Without a cluster the
device's own link facts price communication, exactly as before clusters existed;
with one, its tiers' bandwidths (times each collective's efficiency) do, and its
node size places the axes. Compiled files are held by a MachineCatalog, an
explicit cache object; `CATALOG` is the process's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

import difflib
from hpdsl.errors import InputError
from hpdsl.ir.nodes import ClusterIR, DeviceIR, TierIR
from hpdsl.resources import STDLIB_PREFIX, data_dir


@attrs.frozen(auto_exc=True)
class UnknownMachineError(InputError):
    """A device or cluster is neither a shipped name nor a .hpf file declaring one."""


ALIASES = {"a100": "a100_80gb", "a10080gb": "a100_80gb", "h100": "h100_sxm", "h100sxm": "h100_sxm",
           "h100sxm5": "h100_sxm", "910b": "ascend910b", "ascend": "ascend910b", "dgxa100": "dgx_a100",
           "dgxh100": "dgx_h100"}
"""Short names for shipped devices and clusters (keys spelled without '-', '_' or spaces)."""


Table = dict[str, tuple[Any, str]]
"""Devices (DeviceIR) or clusters (ClusterIR) by name, each with the file that declares it."""


@attrs.frozen
class Machine:
    """The device a strategy runs on, the cluster around it (None: the device's own links), and where each came from."""

    key: str
    device: DeviceIR
    device_file: str
    cluster: ClusterIR | None = None
    cluster_file: str | None = None

    @property
    def devices_per_node(self) -> int:
        """Return the devices in one node: the cluster's, else the device's."""
        return self.cluster.devices_per_node if self.cluster is not None else self.device.devices_per_node

    def link_bandwidth(self, scope: str, collective: str = "all_reduce") -> float:
        """Return bytes/s per device and direction a `collective` reaches at `scope` (node or network)."""
        if self.cluster is not None:
            for tier in self.cluster.tiers:
                if tier.scope == scope:
                    return tier.bandwidth * tier.efficiency.get(collective, 1.0)
        return self.device.intra_node_bandwidth if scope == "node" else self.device.inter_node_bandwidth

    def latency(self, scope: str) -> float:
        """Return the seconds per message step at `scope`: the cluster tier's, else the device's `link_latency`."""
        if self.cluster is None:
            return self.device.link_latency
        tier = self._tier(scope)
        return tier.latency if tier is not None else 0.0

    def tree_all_reduce(self, scope: str) -> bool:
        """Return whether the all-reduce at `scope` runs as a tree (the tier's `algorithm`), not a ring."""
        tier = self._tier(scope)
        return tier is not None and tier.algorithm == "tree"

    def _tier(self, scope: str) -> TierIR | None:
        tiers = self.cluster.tiers if self.cluster is not None else ()
        return next((tier for tier in tiers if tier.scope == scope), None)

    def describe(self) -> dict[str, object]:
        """Return what was assumed, for --json: the device, the cluster and their sources."""
        return {"device": self.device.name, "device_source": self.device.source_text,
                "device_file": self.device_file,
                "cluster": None if self.cluster is None else self.cluster.name,
                "cluster_source": None if self.cluster is None else self.cluster.source_text,
                "cluster_file": self.cluster_file, "devices_per_node": self.devices_per_node,
                "intra_node_bandwidth": self.link_bandwidth("node"),
                "inter_node_bandwidth": self.link_bandwidth("network"),
                "op_overhead": self.device.op_overhead, "link_latency": self.latency("node"),
                "tensor_overhead": self.device.tensor_overhead,
                "dtensor_overhead": self.device.dtensor_overhead or self.device.tensor_overhead,
                "dtensor_op_overhead": self.device.dtensor_op_overhead or self.device.op_overhead,
                "shard_overhead": self.device.shard_overhead, "comm_overlap": self.device.comm_overlap,
                "call_overhead": self.device.call_overhead,
                "eager_bandwidth": self.device.eager_bandwidth or (self.device.memory_bandwidth
                                                                   * self.device.memory_efficiency)}


def unknown_message(name: str, what: str, shipped: Iterable[str], aliases: Iterable[str] = ()) -> str:
    """Return "unknown device 'x'", the closest name if one is close, and every shipped choice."""
    names = sorted(shipped)
    close = difflib.get_close_matches(name.lower(), [*names, *aliases], n=1, cutoff=0.6)
    guess = f" (did you mean '{close[0]}'?)" if close else ""
    return (f"unknown {what} '{name}'{guess}; the shipped {what}s are {', '.join(names)}, or give a .hpf "
            f"file declaring one")


def shipped_files() -> list[Path]:
    """Return the shipped device and cluster files, in a stable order."""
    return sorted(data_dir("devices").glob("*.hpf"))


def machine_key(device: str | None, cluster: str | None) -> str:
    """Return the key of `--device D` and `--cluster C` (either may be None)."""
    if cluster is None:
        return device or "h100"
    return f"{device or ''}@{cluster}"


def normal(name: str) -> str:
    """Return a shipped name's lookup form: lower case, alias resolved."""
    key = name.lower().replace("-", "").replace("_", "").replace(" ", "")
    return ALIASES.get(key, name.lower().replace("-", "_"))


@attrs.define
class MachineCatalog:
    """Devices and clusters compiled from the shipped folder and from the files keys name (a cache)."""

    _devices: Table | None = None
    _clusters: Table | None = None
    _machines: dict[str, Machine] = attrs.field(factory=dict)

    def machine(self, key: str) -> Machine:
        """Return the machine of `key`; raise UnknownMachineError listing the choices if a part is unknown."""
        found = self._machines.get(key)
        if found is None:
            found = self._machines[key] = self._resolve(key)
        return found

    def keys(self) -> tuple[str, ...]:
        """Return every key resolved so far, shipped device names first (a grid's device table)."""
        return tuple(dict.fromkeys([*self.device_names(), *self._machines]))

    def device_names(self) -> tuple[str, ...]:
        """Return the shipped device names."""
        return tuple(self._shipped()[0])

    def cluster_names(self) -> tuple[str, ...]:
        """Return the shipped cluster names."""
        return tuple(self._shipped()[1])

    def _resolve(self, key: str) -> Machine:
        device_part, _, cluster_part = key.partition("@")
        cluster, cluster_file = (self._find(cluster_part, "cluster") if cluster_part else (None, None))
        if device_part:
            device, device_file = self._find(device_part, "device")
        elif isinstance(cluster, ClusterIR):
            device, device_file = self._find(cluster.device, "device", near=cluster_file)
        else:
            raise UnknownMachineError("a machine needs a device or a cluster; give --device or --cluster")
        assert isinstance(device, DeviceIR) and (cluster is None or isinstance(cluster, ClusterIR))
        return Machine(key, device, device_file, cluster, cluster_file)

    def _find(self, name: str, what: str, near: str | None = None) -> tuple[Any, str]:
        """Return the device or cluster `name` (shipped, a .hpf path, or declared in file `near`) and its file."""
        shipped = self._shipped()[0 if what == "device" else 1]
        if name.endswith(".hpf"):
            return self._from_file(name, what)
        if near is not None and not near.startswith(STDLIB_PREFIX):
            local = self._declared(Path(near))[0 if what == "device" else 1]
            if name in local:
                return local[name]
        hit = shipped.get(normal(name)) or shipped.get(name)
        if hit is None:
            raise UnknownMachineError(unknown_message(name, what, shipped, ALIASES))
        return hit

    def _from_file(self, path: str, what: str) -> tuple[Any, str]:
        table = self._declared(Path(path))[0 if what == "device" else 1]
        if len(table) != 1:
            raise UnknownMachineError(f"{path} declares {len(table)} {what}s, expected exactly one "
                                      f"({', '.join(sorted(table)) or 'none'})")
        return next(iter(table.values()))

    def _declared(self, path: Path) -> tuple[Table, Table]:
        """Compile `path` beside the shipped devices (a cluster may name one); return what `path` declares."""
        from hpdsl.api import compile_paths  # the compiler loads lazily: `import hpdsl.cost` stays light

        if not path.is_file():
            raise UnknownMachineError(f"cannot read {path}: no such file")
        target = path.resolve()
        others = [p for p in shipped_files() if p.resolve() != target]
        registry = compile_paths([path, *others], stdlib=False)

        # Names are global across the files compiled together, so what the other shipped files
        # declare is all that is not `path`'s.
        elsewhere = {f"{STDLIB_PREFIX}/devices/{p.name}" for p in others}
        devices, clusters = self._shipped()
        return ({n: (d, str(path)) for n, d in registry.devices.items()
                 if devices.get(n, (None, ""))[1] not in elsewhere},
                {n: (c, str(path)) for n, c in registry.clusters.items()
                 if clusters.get(n, (None, ""))[1] not in elsewhere})

    def _shipped(self) -> tuple[Table, Table]:
        if self._devices is None or self._clusters is None:
            from hpdsl.api import compile_paths

            files = shipped_files()
            registry = compile_paths(files, stdlib=False)
            where = {p.name: f"{STDLIB_PREFIX}/devices/{p.name}" for p in files}

            def shown(source: object) -> str:
                file = getattr(source, "file", "")
                return where.get(Path(file).name, file)
            self._devices = {n: (d, shown(d.source)) for n, d in registry.devices.items()}
            self._clusters = {n: (c, shown(c.source)) for n, c in registry.clusters.items()}
        return self._devices, self._clusters


CATALOG = MachineCatalog()
"""The process's catalog: shipped devices compiled on first use, files as keys name them."""
