"""The keys a `device`, a `cluster` and a network `tier` declare: one record per key, read by every stage.

The checks (hpdsl/check/machines.py) test declarations against these records, the
lowering (hpdsl/ir/machines.py) reads values by them, and docs/cost-model.md
describes the units. Bandwidths are bytes per second per device and direction
(a ring moves bytes one way per link, so a datasheet's bidirectional figure is
halved); FLOP/s are dense (not 2:4 sparse); efficiencies are shares of a peak in (0, 1].
"""

from __future__ import annotations

from typing import Literal

import attrs

ValueKind = Literal["int", "float", "string"]


@attrs.frozen
class Key:
    """One setting a declaration may state: its value kind, range, whether required, what it means."""

    name: str
    kind: ValueKind
    meaning: str
    required: bool = False
    low: float = 0.0            # exclusive for numbers: every quantity here is positive
    zero_ok: bool = False       # 0 is allowed too (a share that may be none)
    high: float = float("inf")  # inclusive
    default: float | str | None = None
    choices: tuple[str, ...] = ()  # a string key's allowed values (none: any)


PEAK_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
"""The dtypes a device states a dense peak for (`peak_bf16 = ...`); bf16 is required."""

DEVICE_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("memory_bytes", "int", "memory capacity in bytes, what the search fits against", required=True),
    Key("memory_bandwidth", "float", "memory (HBM or DRAM) bandwidth in bytes/s", required=True),
    Key("memory_efficiency", "float", "share of memory_bandwidth memory-bound kernels reach", required=True,
        high=1.0),
    *(Key(f"peak_{d}", "float", f"dense {d} FLOP/s", required=d == "bf16") for d in PEAK_DTYPES),
    Key("intra_node_bandwidth", "float", "bytes/s per device and direction within a node (NVLink, xGMI, "
        "HCCS)", required=True),
    Key("inter_node_bandwidth", "float", "bytes/s per device and direction across nodes (one NIC per device)",
        required=True),
    Key("devices_per_node", "int", "devices in one node (default 8)", default=8),
    Key("op_overhead", "float", "host seconds per op of a layer, forward and backward, beyond its arithmetic "
        "(eager dispatch and autograd: a tiny op's time; default 0)", high=1.0),
    Key("call_overhead", "float", "host seconds per aten call of eager PyTorch code, forward or backward, "
        "beyond its arithmetic: with it the time model prices a column by what its families' `eager` terms "
        "declare (default 0: not priced)", high=1.0),
    Key("eager_bandwidth", "float", "bytes/s eager elementwise kernels (norms, activations, products, "
        "transcendentals) move, beyond their calls (default memory_bandwidth x memory_efficiency)"),
    Key("link_latency", "float", "seconds per message step on the device's own links, used without a cluster "
        "(default 0)", high=1.0),
    Key("optimizer_bandwidth", "float", "bytes/s the optimizer step moves (2 passes over weights, gradients "
        "and states; default memory_bandwidth x memory_efficiency)"),
    Key("tensor_overhead", "float", "host seconds per parameter tensor a step: the optimizer step, gradient norm "
        "and zero_grad visit each tensor (default 0)", high=1.0),
    Key("dtensor_overhead", "float", "host seconds per parameter tensor a step when the parameters are DTensors "
        "(tp or dp > 1; default tensor_overhead)", high=1.0),
    Key("dtensor_op_overhead", "float", "host seconds per op of a layer whose linears are DTensors (tp > 1: "
        "their dispatch through DTensor; default op_overhead)", high=1.0),
    Key("shard_overhead", "float", "host seconds per FSDP2 unit and micro-batch beyond its bytes: the all-gather "
        "and reduce-scatter's copies, bookkeeping and message latency (ZeRO-3; default 0)", high=1.0, zero_ok=True),
    Key("comm_overlap", "float", "share of a collective's time that hides behind compute where the backend "
        "overlaps them (gradient reduction, ZeRO's gathers; default 1: all of it, as on a GPU's own links)",
        high=1.0, zero_ok=True),
    Key("source", "string", "where the numbers come from (datasheet, measurement)", required=True),
)}
"""Every key a `device` block may set."""

CURVES = {"matmul": "share of peak a matmul reaches at size (m·n·k)^(1/3), interpolated in log size",
          "attention": "share of peak the attention kernel's score work (forward, backward and the flash "
                       "backward's recompute, as the families count it) reaches at size "
                       "(tokens·keys·head_dim)^(1/3); default the matmul curve"}
"""The curves a device may declare."""

REQUIRED_CURVES = ("matmul",)
"""The curves every device declares."""

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")
"""The collectives a tier states an efficiency for (default 1: the tier's bandwidth as stated)."""

SCOPES = ("node", "network")
"""Where a tier sits: within a node, or across nodes."""

ALGORITHMS = ("ring", "tree")
"""How a tier's all-reduce runs: a ring of n devices takes 2(n - 1) message steps, a (double binary) tree
2·ceil(log2 n); both move the ring's bytes (docs/cost-model.md#the-device-time-model)."""

TIER_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("scope", "string", "node (within a node) or network (across nodes)", required=True, choices=SCOPES),
    Key("bandwidth", "float", "bytes/s per device and direction", required=True),
    Key("latency", "float", "seconds per message step (a ring of n devices takes n - 1 steps)", required=True,
        high=1.0),
    *(Key(c, "float", f"share of bandwidth a {c.replace('_', '-')} reaches", high=1.0, default=1.0)
      for c in COLLECTIVES),
    Key("algorithm", "string", "ring or tree: how the all-reduce's latency grows with the group (default ring)",
        default="ring", choices=ALGORITHMS),
)}
"""Every key a cluster's `tier` block may set."""

CLUSTER_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("device", "string", "the device every node holds (a device name)", required=True),
    Key("devices_per_node", "int", "devices in one node", required=True),
    Key("source", "string", "where the numbers come from", required=True),
)}
"""Every key a `cluster` block may set."""
