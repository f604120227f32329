"""Device and cluster declarations into diagnostics: keys known, stated once, typed and in range.

The keys are hpdsl/model/machine.py's records; a cluster's device must be in
scope (the shipped devices/ folder is, when the cost side compiles a cluster).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hpdsl import ast
from hpdsl.diagnostics import Collector, Note, did_you_mean
from hpdsl.diagnostics.span import Span
from hpdsl.model.machine import CLUSTER_KEYS, CURVES, DEVICE_KEYS, REQUIRED_CURVES, TIER_KEYS, Key
from hpdsl.scope import Scope


def check_machines(scope: Scope, collector: Collector) -> None:
    """Report every problem of the devices and clusters in scope."""
    for device in scope.devices.values():
        settings = [item for item in device.items if isinstance(item, ast.Setting)]
        check_settings(settings, DEVICE_KEYS, f"device '{device.name.value}'", device.name.span, collector)
        check_curves([item for item in device.items if isinstance(item, ast.Curve)], device, collector)
    for cluster in scope.clusters.values():
        settings = [item for item in cluster.items if isinstance(item, ast.Setting)]
        where = f"cluster '{cluster.name.value}'"
        check_settings(settings, CLUSTER_KEYS, where, cluster.name.span, collector)
        tiers = [item for item in cluster.items if isinstance(item, ast.Tier)]
        for tier in tiers:
            check_settings(tier.settings, TIER_KEYS, f"tier '{tier.name.value}' of {where}", tier.name.span,
                           collector)
        check_tiers(tiers, cluster, collector)
        check_device_named(settings, scope.devices, collector)


def check_settings(settings: Iterable[ast.Setting], keys: Mapping[str, Key], where: str, at: Span,
                   collector: Collector) -> None:
    """Report unknown, repeated, mistyped, out-of-range and missing keys of one block."""
    seen: dict[str, ast.Setting] = {}
    for setting in settings:
        name = setting.key.value
        key = keys.get(name)
        if key is None:
            collector.error(setting.key.span, "unknown-machine-key", f"{where} has no key '{name}'",
                            hint=did_you_mean(name, keys))
        elif name in seen:
            collector.error(setting.key.span, "duplicate-machine-key", f"{where} sets '{name}' twice",
                            hint="keep one of them", notes=(Note(seen[name].key.span, "first set here"),))
        else:
            seen[name] = setting
            check_value(setting, key, where, collector)
    for key in keys.values():
        if key.required and key.name not in seen:
            collector.error(at, "missing-machine-key", f"{where} does not state '{key.name}'",
                            hint=f"add `{key.name} = ...`: {key.meaning}")


def check_value(setting: ast.Setting, key: Key, where: str, collector: Collector) -> None:
    """Report a value of the wrong kind or outside (low, high]."""
    value = setting.value
    numeric = value.kind in ("int", "float") and (key.kind == "float" or value.kind == key.kind)
    if key.kind == "string":
        if value.kind != "string":
            collector.error(value.span, "bad-machine-value", f"{where}: '{key.name}' must be a string",
                            hint=f'write it in quotes: {key.name} = "..."')
        elif key.choices and value.value not in key.choices:
            collector.error(value.span, "bad-machine-value",
                            f"{where}: {key.name} is '{value.value}', expected one of {', '.join(key.choices)}",
                            hint=did_you_mean(str(value.value), key.choices))
        return
    if not numeric:
        collector.error(value.span, "bad-machine-value",
                        f"{where}: '{key.name}' must be {'an integer' if key.kind == 'int' else 'a number'}, "
                        f"found {value.kind}", hint=key.meaning)
    elif not (key.low < float(value.value) <= key.high or (key.zero_ok and float(value.value) == 0)):
        top = "" if key.high == float("inf") else f" and at most {key.high:g}"
        low = f"from {key.low:g}" if key.zero_ok and key.low == 0 else f"above {key.low:g}"
        collector.error(value.span, "bad-machine-value",
                        f"{where}: '{key.name}' is {value.value}, expected {low}{top}",
                        hint=key.meaning)


def check_curves(curves: list[ast.Curve], device: ast.Device, collector: Collector) -> None:
    """Report unknown or repeated curves, a missing matmul curve, and points that do not rise."""
    seen: set[str] = set()
    for curve in curves:
        name = curve.name.value
        if name not in CURVES or name in seen:
            why = "is declared twice" if name in seen else "is not a curve a device declares"
            collector.error(curve.name.span, "bad-curve", f"curve '{name}' {why}",
                            hint=did_you_mean(name, CURVES) if name not in CURVES else "keep one of them")
        seen.add(name)
        check_points(curve, collector)
    for name in sorted(set(REQUIRED_CURVES) - seen):
        collector.error(device.name.span, "bad-curve", f"device '{device.name.value}' declares no {name} curve",
                        hint=f"add `curve {name} {{ SIZE EFFICIENCY ... }}`: {CURVES[name]}")


def check_points(curve: ast.Curve, collector: Collector) -> None:
    """Report an empty curve, sizes that do not rise, and shares outside (0, 1]."""
    if not curve.points:
        collector.error(curve.span, "bad-curve", f"curve '{curve.name.value}' has no points",
                        hint="write SIZE EFFICIENCY pairs, e.g. `64 0.05  4096 0.7`")
    last = 0.0
    for point in curve.points:
        size, share = point.size, point.efficiency  # numbers: the grammar takes nothing else
        if float(size.value) <= last:
            collector.error(size.span, "bad-curve", f"size {size.value} does not rise above {last:g}",
                            hint="list the points by rising size")
        if not 0.0 < float(share.value) <= 1.0:
            collector.error(share.span, "bad-curve", f"efficiency {share.value} is not in (0, 1]",
                            hint="an efficiency is a share of peak")
        last = max(last, float(size.value))


def check_tiers(tiers: list[ast.Tier], cluster: ast.Cluster, collector: Collector) -> None:
    """Report a cluster without a node tier, or with two tiers at one scope."""
    by_scope: dict[str, ast.Tier] = {}
    for tier in tiers:
        scope = next((str(s.value.value) for s in tier.settings if s.key.value == "scope"), None)
        if scope is None:
            continue
        if scope in by_scope:
            collector.error(tier.name.span, "bad-tier", f"two tiers at scope '{scope}'",
                            hint="one tier within a node and one across nodes",
                            notes=(Note(by_scope[scope].name.span, "the first"),))
        by_scope.setdefault(scope, tier)
    if "node" not in by_scope:
        collector.error(cluster.name.span, "bad-tier", f"cluster '{cluster.name.value}' has no tier within a node",
                        hint='add `tier nvlink { scope = "node" bandwidth = ... latency = ... }`')


def check_device_named(settings: list[ast.Setting], devices: Mapping[str, ast.Device],
                       collector: Collector) -> None:
    """Report a cluster's device that no declaration in scope names."""
    for setting in settings:
        if setting.key.value == "device" and setting.value.kind == "string" and setting.value.value not in devices:
            name = str(setting.value.value)
            collector.error(setting.value.span, "unknown-device", f"no device '{name}' is in scope",
                            hint=did_you_mean(name, devices))
