"""Checked device and cluster declarations into DeviceIR and ClusterIR: keys read, defaults filled in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hpdsl import ast
from hpdsl.ir.nodes import ClusterIR, CurvePointIR, DeviceIR, SourceRef, TierIR
from hpdsl.model.machine import COLLECTIVES, DEVICE_KEYS, PEAK_DTYPES, TIER_KEYS, Key


def settings_of(settings: Iterable[ast.Setting], keys: Mapping[str, Key]) -> dict[str, float | str]:
    """Return the stated values by key, each unstated key's default filled in (checked: types are right)."""
    values: dict[str, float | str] = {k.name: k.default for k in keys.values() if k.default is not None}
    for setting in settings:
        value = setting.value.value
        values[setting.key.value] = value if isinstance(value, str) else float(value)
    return values


def lower_device(device: ast.Device) -> DeviceIR:
    """Return the IR of one checked device."""
    v = settings_of((i for i in device.items if isinstance(i, ast.Setting)), DEVICE_KEYS)
    curves = {i.name.value: i for i in device.items if isinstance(i, ast.Curve)}
    curve = curves["matmul"]
    return DeviceIR(
        name=device.name.value, memory_bytes=int(v["memory_bytes"]),
        memory_bandwidth=float(v["memory_bandwidth"]), memory_efficiency=float(v["memory_efficiency"]),
        peak_flops={d: float(v[f"peak_{d}"]) for d in PEAK_DTYPES if f"peak_{d}" in v},
        matmul=tuple(CurvePointIR(float(p.size.value), float(p.efficiency.value)) for p in curve.points),
        intra_node_bandwidth=float(v["intra_node_bandwidth"]), inter_node_bandwidth=float(v["inter_node_bandwidth"]),
        devices_per_node=int(v["devices_per_node"]), source_text=str(v["source"]),
        source=SourceRef.from_span(device.name.span), op_overhead=float(v.get("op_overhead", 0.0)),
        link_latency=float(v.get("link_latency", 0.0)),
        optimizer_bandwidth=float(v.get("optimizer_bandwidth", 0.0)),
        tensor_overhead=float(v.get("tensor_overhead", 0.0)), dtensor_overhead=float(v.get("dtensor_overhead", 0.0)),
        dtensor_op_overhead=float(v.get("dtensor_op_overhead", 0.0)), shard_overhead=float(v.get("shard_overhead", 0.0)),
        comm_overlap=float(v.get("comm_overlap", 1.0)), call_overhead=float(v.get("call_overhead", 0.0)),
        eager_bandwidth=float(v.get("eager_bandwidth", 0.0)),
        attention=tuple(CurvePointIR(float(p.size.value), float(p.efficiency.value))
                        for p in (curves["attention"].points if "attention" in curves else ())))


def lower_cluster(cluster: ast.Cluster) -> ClusterIR:
    """Return the IR of one checked cluster."""
    v = {s.key.value: s.value.value for s in cluster.items if isinstance(s, ast.Setting)}
    tiers = tuple(lower_tier(t) for t in cluster.items if isinstance(t, ast.Tier))
    return ClusterIR(name=cluster.name.value, device=str(v["device"]), devices_per_node=int(v["devices_per_node"]),
                     tiers=tiers, source_text=str(v["source"]), source=SourceRef.from_span(cluster.name.span))


def lower_tier(tier: ast.Tier) -> TierIR:
    """Return the IR of one checked tier, every collective's efficiency filled in."""
    v = settings_of(tier.settings, TIER_KEYS)
    return TierIR(name=tier.name.value, scope=str(v["scope"]), bandwidth=float(v["bandwidth"]),
                  latency=float(v["latency"]), efficiency={c: float(v[c]) for c in COLLECTIVES},
                  algorithm=str(v["algorithm"]))
