"""Devices (peaks, efficiency curves) and clusters (network tiers)."""

from __future__ import annotations

from typing import Union

import attrs

from hpdsl.ast.leaves import Literal, Name, _span
from hpdsl.ast.profiles import Setting
from hpdsl.diagnostics.span import Span


# --------------------------------------------------------------------------
# Devices and clusters
# --------------------------------------------------------------------------


@attrs.frozen
class CurvePoint:
    """`4096 0.62` inside a curve: a size and the share of peak reached there."""

    size: Literal
    efficiency: Literal
    span: Span = _span()


@attrs.frozen
class Curve:
    """`curve matmul { ... }` inside a device: an efficiency over a size, by points."""

    name: Name
    points: tuple[CurvePoint, ...]
    span: Span = _span()


DeviceItem = Union[Setting, Curve]


@attrs.frozen
class Device:
    """`device NAME { ... }`: one accelerator's peaks, memory, efficiencies and links."""

    name: Name
    items: tuple[DeviceItem, ...]
    span: Span = _span()


@attrs.frozen
class Tier:
    """`tier NAME { ... }` inside a cluster: one network level's bandwidth, latency and efficiencies."""

    name: Name
    settings: tuple[Setting, ...]
    span: Span = _span()


ClusterItem = Union[Setting, Tier]


@attrs.frozen
class Cluster:
    """`cluster NAME { ... }`: devices per node and the network tiers between them."""

    name: Name
    items: tuple[ClusterItem, ...]
    span: Span = _span()
