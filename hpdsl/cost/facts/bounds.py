"""The largest value each strategy and search input may take, so every price is finite and exact.

The pricing holds strategies in int64 arrays and prices in float64 (hpdsl/cost/
context.py). Each bound is far past any real job, and small enough that every
product the pricing forms stays exact: the layout's products (dp·tp·pp·cp,
micro_batch·dp·pp, pp·vpp) stay below 2^63, and the byte and FLOP totals, with
model fields up to MAX_DIMENSION (hpdsl/model/fields.py), stay finite floats.
A value past its bound is refused with the reason, before anything is priced.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from hpdsl.model.fields import MAX_LAYERS

MAX_DEGREE = 1 << 20
"""tp, pp, dp, cp, ep, etp and vpp: a million-way split of any one axis."""
MAX_DEVICES = 1 << 24
"""dp·tp·pp·cp and a stated device count: sixteen million devices."""
MAX_MICRO_BATCH = 1 << 24
"""Sequences per micro-batch."""
MAX_GLOBAL_BATCH = 1 << 40
"""Sequences per step."""
MAX_SEQ_LEN = 1 << 30
"""Tokens per sequence: a billion."""
MAX_BYTES = 64
"""Bytes per element (softmax, parameter and activation widths)."""
MIN_MFU = 1e-6
"""The smallest fraction of peak FLOP/s: below it, a step of the largest batch takes infinite time."""
MAX_TOP = 200
"""Strategies a search returns (each is estimated in full; `search --run` asks for 200)."""
MAX_CHOICES = 16
"""Values a search tries per list (--micro-batches, --vpp)."""
MAX_CANDIDATES = 2_000_000
"""Candidates a search prices, and bound rows it bounds (hpdsl/cost/sweep/prune.py): past this it takes minutes, so it asks for a narrower search."""

STRATEGY_BOUNDS: dict[str, int] = {
    **dict.fromkeys(("tp", "pp", "dp", "cp", "ep", "etp", "vpp"), MAX_DEGREE),
    "micro_batch": MAX_MICRO_BATCH, "global_batch": MAX_GLOBAL_BATCH, "seq_len": MAX_SEQ_LEN,
    "recompute_layers": MAX_LAYERS, "param_bytes": MAX_BYTES, "compute_bytes": MAX_BYTES,
    "softmax_bytes": MAX_BYTES, "num_devices": MAX_DEVICES,
}
"""The largest value of each whole-number Strategy field."""


def _power(bound: int) -> str:
    return f"2^{bound.bit_length() - 1}" if bound & (bound - 1) == 0 and bound > 1024 else f"{bound:,}"


def bound_reasons(strategy: Any) -> tuple[str, ...]:
    """Return why a strategy's numbers are past what can be priced (empty: all within bounds)."""
    reasons = [f"{name} must be at most {_power(bound)}, got {_short(value)}"
               for name, bound in STRATEGY_BOUNDS.items()
               if isinstance(value := getattr(strategy, name), int) and value > bound]
    # Stated, these must be positive: 0 or less would read as "unstated" and be silently ignored.
    reasons += [f"{name} must be at least 1, got {_short(value)}" for name in ("global_batch", "num_devices")
                if isinstance(value := getattr(strategy, name), int) and value < 1]
    if not reasons and strategy.dp * strategy.tp * strategy.pp * strategy.cp > MAX_DEVICES:
        reasons.append(f"dp·tp·pp·cp = {strategy.devices:,} devices, more than {_power(MAX_DEVICES)}")
    split = strategy.pp_split
    if split is not None and (len(split) > MAX_LAYERS or any(abs(n) > MAX_LAYERS for n in split)):
        reasons.append(f"pp_split must list at most {MAX_LAYERS:,} chunks of at most {MAX_LAYERS:,} layers")
    return tuple(reasons)


def search_bound_reasons(devices: int, top: int, lists: Sequence[tuple[str, Sequence[int]]],
                         global_batch: int, seq_len: int) -> Iterator[str]:
    """Yield why a search's numbers are past what can be searched (nothing: all within bounds)."""
    if devices > MAX_DEVICES:
        yield f"devices must be at most {_power(MAX_DEVICES)}, got {_short(devices)}"
    if top > MAX_TOP:
        yield f"top must be at most {MAX_TOP}, got {_short(top)}"
    for name, values in lists:
        if len(values) > MAX_CHOICES:
            yield f"{name} lists {len(values)} values, more than {MAX_CHOICES}"
        bound = MAX_MICRO_BATCH if name == "micro-batches" else MAX_DEGREE
        past = [_short(v) for v in values if v > bound]
        if past:
            yield f"{name} must be at most {_power(bound)}, got {', '.join(past[:4])}"
    if global_batch > MAX_GLOBAL_BATCH:
        yield f"global batch must be at most {_power(MAX_GLOBAL_BATCH)}, got {_short(global_batch)}"
    if seq_len > MAX_SEQ_LEN:
        yield f"seq-len must be at most {_power(MAX_SEQ_LEN)}, got {_short(seq_len)}"


def _short(value: int) -> str:
    text = f"{value:,}"
    return text if len(text) <= 32 else f"{str(value)[:8]}...({len(str(value))} digits)"
