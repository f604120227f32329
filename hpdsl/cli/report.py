"""Estimates and search results into what the CLI prints: a per-stage table, JSON, a PNG plot.

`hpdsl estimate` and `hpdsl search` (hpdsl/cli/cost.py) declare their flags
from ESTIMATE_FLAGS and SEARCH_FLAGS (hpdsl/cli/options.py), build the Strategy with
`strategy_from_flags`, and print with `render_estimate`, `render_search` and
`plot_memory`; errors travel to the CLI group, which owns exit codes. rich and matplotlib are imported only by the
functions that draw with them.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpdsl.cli.options import ESTIMATE_FLAGS, SEARCH_FLAGS, FlagTable
from hpdsl.errors import InputError

if TYPE_CHECKING:  # the estimator needs numpy: imported when a command prices something
    from hpdsl.cost.estimate import Estimate
    from hpdsl.cost.search import SearchResult
    from hpdsl.model.strategy import Strategy

GIB = 1024**3

# --------------------------------------------------------------------------
# Flags
# --------------------------------------------------------------------------


def machine_line(device: str) -> str:
    """Return the line naming the device and cluster an estimate assumed, and the files they came from."""
    from hpdsl.cost.facts.devices import get_machine

    m = get_machine(device).describe()
    line = f"machine: device {m['device']} ({m['device_file']})"
    if m["cluster"] is not None:
        line += f" in cluster {m['cluster']} ({m['cluster_file']})"
    intra, inter = get_machine(device).link_bandwidth("node"), get_machine(device).link_bandwidth("network")
    return line + f"; {m['devices_per_node']} per node, {_si(intra, 'B/s')} within a node, {_si(inter, 'B/s')} across"


def strategy_from_flags(flags: Mapping[str, Any]) -> Strategy:
    """Return the Strategy the flags state (None values keep the defaults)."""
    from hpdsl.cost.feasibility.problems import InvalidStrategyError
    from hpdsl.model.strategy import Strategy

    values = {k: v for k, v in flags.items() if v is not None}
    if isinstance(values.get("pp_split"), str):
        values["pp_split"] = parse_ints(values["pp_split"], "--pp-split")
    try:
        return Strategy(**values)
    except TypeError as error:
        raise InvalidStrategyError(f"bad strategy flags: {error}", (str(error),)) from None


INT_MAX = 2**63 - 1
"""The largest whole number a flag may give: the estimator prices in 64-bit integers."""


def flag_reasons(flags: Mapping[str, Any], table: FlagTable) -> dict[str, str]:
    """Return, per flag keyword, why its value cannot be priced (past 2^63-1, not finite); empty: all usable."""
    reasons: dict[str, str] = {}
    for flag, name, kind, _ in table:
        value = flags.get(name)
        shown = flag.split("/")[0]
        if value is None or kind is bool:
            continue
        if kind is int and not -INT_MAX - 1 <= value <= INT_MAX:
            reasons[name] = f"{shown} {_short(value)} is past 2^63-1"
        elif kind is float and not math.isfinite(value * (GIB if name == "memory_gib" else 1)):
            what = ": memory per device must be a finite size" if name == "memory_gib" else \
                " is not a finite number"
            reasons[name] = f"{shown} {value:g}{what}"
    return reasons


def strategy_or_reasons(flags: Mapping[str, Any], cost_model: Any) -> Strategy:
    """Return the Strategy the estimate flags state; InvalidStrategyError with every reason otherwise."""
    from hpdsl.cost.feasibility.problems import InvalidStrategyError
    from hpdsl.cost.feasibility.reasons import validate_strategy

    bad = flag_reasons(flags, ESTIMATE_FLAGS)
    strategy = strategy_from_flags({k: v for k, v in flags.items() if k not in bad})
    if bad:
        reasons = (*bad.values(), *validate_strategy(strategy, cost_model))
        listed = "\n".join(f"  - {reason}" for reason in reasons)
        raise InvalidStrategyError(f"the strategy cannot run {cost_model.model.name}:\n{listed}", reasons)
    return strategy


def require_search_flags(flags: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    """Raise InvalidStrategyError with every reason if a search flag is unusable (`options`: the parsed rest)."""
    from hpdsl.cost.sweep.rank import require_search_inputs, search_input_reasons

    bad = flag_reasons(flags, SEARCH_FLAGS)
    if not bad:
        return
    clean = {k: v for k, v in options.items() if k not in bad}
    keywords = {k: clean[k] for k in ("micro_batches", "vpp", "global_batch", "seq_len", "precision",
                                      "optimizer", "impl", "softmax_bytes") if k in clean}
    require_search_inputs((*bad.values(), *search_input_reasons(
        clean.get("devices", 1), None, clean.get("top", 10), **keywords)))


def _short(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:8]}...({len(text)} digits)"


def parse_ints(value: str | Sequence[int], flag: str) -> tuple[int, ...]:
    """Return the whole numbers of a comma-separated flag value; InputError naming the flag otherwise."""
    if not isinstance(value, str):
        return tuple(int(v) for v in value)
    try:
        numbers = tuple(int(part) for part in value.replace(" ", "").split(",") if part)
    except ValueError:
        raise InputError(f"{flag} takes comma-separated whole numbers, got '{value[:60]}'") from None
    past = [_short(n) for n in numbers if not -INT_MAX - 1 <= n <= INT_MAX]
    if past:
        raise InputError(f"{flag} takes whole numbers up to 2^63-1, got {', '.join(past)}")
    return numbers


# --------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------


def _gib(value: float) -> str:
    return f"{value / GIB:,.2f}"


def _si(value: float, unit: str = "") -> str:
    for scale, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:,.2f} {prefix}{unit}"
    return f"{value:,.0f} {unit}".rstrip()


def describe_strategy(s: Strategy) -> str:
    """Return a one-line summary of a strategy."""
    split = f" split {','.join(map(str, s.pp_split))}" if s.pp_split else ""
    parts = [f"tp {s.tp}", f"pp {s.pp}" + (f"x{s.vpp}" if s.vpp > 1 else "") + split, f"dp {s.dp}",
             f"cp {s.cp}" + (f" ({s.cp_kind})" if s.cp > 1 else ""), f"ep {s.ep}", f"etp {s.etp}"]
    parts.append("sp" if s.sequence_parallel else "no sp")
    parts += [f"mb {s.micro_batch} x {s.micro_batches}", f"recompute {s.recompute}", f"zero {s.zero}"]
    return ", ".join(parts)


def describe_assumptions(e: Estimate) -> str:
    """Return the line saying which precision and optimizer the static memory assumed, byte by byte."""
    a = e.assumptions()
    parts = [f"{a['param_bytes']} weights", f"{a['grad_bytes']} gradients", f"{a['master_bytes']} master",
             f"{a['extra_bytes']} fp8 weight copy" if a["extra_bytes"] else "",
             f"{a['optimizer_states']}x{a['optimizer_state_bytes']} optimizer states"]
    return (f"assumed {a['precision']}, {a['optimizer']}: " + " + ".join(p for p in parts if p)
            + f" = {a['static_bytes_per_param']} B per parameter before ZeRO; activations {a['compute_bytes']} B, "
            + f"impl {e.strategy.impl}" + IMPL_KERNELS.get(e.strategy.impl, ""))


IMPL_KERNELS = {
    "hf-sdpa": " (SDPA's GPU kernels: flash, memory-efficient where qk and v head sizes differ or a bias is added)",
    "hf-sdpa-cpu": " (SDPA's CPU kernels: math where qk and v head sizes differ or a learnt bias is added)",
}
"""The attention kernels an hf implementation's estimate assumed (docs/cost-model.md#activations-per-implementation)."""


def describe_breakdown(parts: dict[str, float]) -> str:
    """Return the step's time by part: the steady state (compute, each axis), the bubble, what follows."""
    def seconds(name: str) -> str:
        return f"{parts[name]:,.3f} s"

    inner = [f"{name.removesuffix('_s')} {seconds(name)}" for name in ("compute_s", "tp_s", "cp_s", "ep_s", "pp_s")
             if parts.get(name)]
    if parts.get("host_s") and inner:  # a share of the compute: the ops' host dispatch (the device's op_overhead)
        inner[0] += f" of which op dispatch {seconds('host_s')}"
    out = [f"steady {seconds('steady_s')} ({', '.join(inner)})" if inner else f"steady {seconds('steady_s')}"]
    if parts.get("bubble_s"):
        out.append(f"bubble {seconds('bubble_s')}")
    if parts.get("after_backward_s"):
        tensors = f", of which per tensor {seconds('optimizer_tensors_s')}" if parts.get("optimizer_tensors_s") else ""
        sums = f", gradient sums {seconds('grad_sum_s')}" if parts.get("grad_sum_s") else ""
        tail = f" (optimizer step {seconds('optimizer_s')}{tensors}{sums})" if parts.get("optimizer_s") else ""
        out.append(f"after the last backward {seconds('after_backward_s')}{tail}")
    return ", ".join(out)


def render_estimate(e: Estimate) -> str:
    """Return the readable report of one estimate: summary lines and the per-stage table."""
    from rich.table import Table

    s = e.strategy
    head = [
        f"{e.model} on {s.devices} x {s.device}: {describe_strategy(s)}; seq {s.seq_len}, "
        f"batch {s.batch} sequences",
        describe_assumptions(e),
        machine_line(s.device),
        f"parameters {e.params.total:,} ({e.params.total / 1e9:,.2f} B), active {e.params.active:,}",
        f"FLOPs per step executed {_si(e.flops.total, 'FLOP')} (forward {_si(e.flops.forward)}, backward "
        f"{_si(e.flops.backward)}, recompute {_si(e.flops.recompute)}); busiest device "
        f"{_si(e.flops.per_device, 'FLOP')}; model (MFU convention) {_si(e.flops.model_total, 'FLOP')}",
        f"step {e.step_time_s:,.3f} s, {e.tokens_per_s:,.0f} tokens/s, MFU {e.mfu:.1%} of peak "
        + (f"(assumed {s.mfu} of peak on the executed FLOPs)" if s.mfu else
           f"(the device time model: its matmul curve, memory bandwidth and links; {_peaks_used(s)})"),
        "where the step goes: " + describe_breakdown(e.breakdown),
        "traffic per step on the busiest device: "
        + ", ".join(f"{axis} {_si(v, 'B')}" for axis, v in e.communication.items() if v),
    ]
    table = Table(title=f"memory per device (GiB), capacity {_gib(e.memory.capacity_bytes)}")
    for name in ("stage", "layers", "params", "grads", "optimizer", "activations", "transient",
                 "total", "ms / micro-batch"):
        table.add_column(name, justify="left" if name == "layers" else "right")
    for st in e.memory.per_stage:
        layers = ", ".join(f"{k} {v}" for k, v in st.columns.items())
        mark = " *" if st.stage == e.memory.peak_stage else ""
        table.add_row(f"{st.stage}{mark}", layers, _gib(st.params_bytes), _gib(st.grads_bytes),
                      _gib(st.optimizer_bytes), _gib(st.activation_bytes), _gib(st.transient_bytes),
                      _gib(st.total_bytes), f"{st.micro_batch_time_s * 1e3:,.1f}")
    verdict = "fits" if e.memory.fits else "does NOT fit"
    tail = f"peak {_gib(e.memory.peak_bytes)} GiB on stage {e.memory.peak_stage}: {verdict}"
    return "\n".join(head) + "\n" + _render(table) + tail


def _peaks_used(s: Strategy) -> str:
    """Return the dtypes and peaks the device time model priced a strategy's arithmetic at."""
    from hpdsl.cost.facts.devices import precision_peaks
    from hpdsl.cost.facts.precision import PRECISIONS

    precision = PRECISIONS[s.precision]
    (mm, mm_peak), (rest, peak) = precision_peaks(s.device, s.precision)
    missing = sorted({want for want, used in ((precision.matmul, mm), (precision.scores, rest)) if want != used})
    fallback = f"; no peak_{' or peak_'.join(missing)} stated, so bf16's" if missing else ""
    if (mm, mm_peak) == (rest, peak):
        return f"matmuls at the {rest} peak, {_si(peak, 'FLOP/s')}{fallback}"
    return (f"a layer's weight matmuls at the {mm} peak, {_si(mm_peak, 'FLOP/s')}, "
            f"the rest at {rest}'s, {_si(peak, 'FLOP/s')}{fallback}")


def render_search(r: SearchResult) -> str:
    """Return the readable ranking of a search."""
    from rich.table import Table

    tally = f"{r.enumerated:,} candidates, {r.valid:,} valid, {r.fitting:,} fit"
    if r.skipped:
        tally = (f"{r.enumerated:,} candidates: {r.skipped:,} skipped by bound; of the "
                 f"{r.enumerated - r.skipped:,} checked, {r.valid:,} valid and {r.fitting:,} fit")
    head = (f"{r.model} on {r.devices} devices with {_gib(r.memory_bytes)} GiB each: {tally} "
            f"(searched in {r.seconds:.2f} s)")
    if r.skipped:
        head += ("\nskipped: neither checked nor priced, their lower bounds on step time and memory "
                 "could not beat the answer (the same as pricing every candidate)")
    if r.top:
        head += "\n" + describe_assumptions(r.top[0]) + "\n" + machine_line(r.top[0].strategy.device)
    if r.pareto:
        head += "\nthe memory/step-time frontier: each row is faster than every row with less peak memory"
    table = Table()
    for name in ("#", "tp", "pp", "dp", "cp", "ep", "etp", "sp", "mb", "recompute", "zero",
                 "peak GiB", "step s", "tokens/s", "MFU", "stands for"):
        table.add_column(name, justify="right")
    counts = r.stands_for or (1,) * len(r.top)
    for rank, (e, count) in enumerate(zip(r.top, counts), 1):
        s = e.strategy
        cp = f"{s.cp}" + (f" {s.cp_kind}" if s.cp > 1 else "")
        pp = f"{s.pp}" + (f" ({','.join(map(str, s.pp_split))})" if s.pp_split else "")
        table.add_row(str(rank), str(s.tp), pp, str(s.dp), cp, str(s.ep), str(s.etp),
                      "on" if s.sequence_parallel else "off", f"{s.micro_batch}x{s.micro_batches}",
                      s.recompute, s.zero, _gib(e.memory.peak_bytes), f"{e.step_time_s:,.3f}",
                      f"{e.tokens_per_s:,.0f}", f"{e.mfu:.1%}", str(count))
    if not r.top:
        return head + "\nno strategy fits"
    return head + "\n" + _render(table).rstrip("\n")


def _render(renderable: Any) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=140, color_system=None, force_terminal=False)
    console.print(renderable)
    return buffer.getvalue()


# --------------------------------------------------------------------------
# Plot
# --------------------------------------------------------------------------


def plot_memory(e: Estimate, path: str | Path) -> None:
    """Draw memory per stage as stacked bars (matplotlib, imported here) into a PNG."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'hpdsl[plot]'") from None
    stages = e.memory.per_stage
    figure = Figure(figsize=(max(5.0, 0.6 * len(stages) + 3), 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    x = [str(st.stage) for st in stages]
    bottom = [0.0] * len(stages)
    for label, field in (("parameters", "params_bytes"), ("gradients", "grads_bytes"),
                         ("optimizer states", "optimizer_bytes"), ("activations", "activation_bytes"),
                         ("transient", "transient_bytes")):
        heights = [getattr(st, field) / GIB for st in stages]
        ax.bar(x, heights, bottom=bottom, label=label)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.axhline(e.memory.capacity_bytes / GIB, color="black", linestyle="--", linewidth=1,
               label=f"{e.strategy.device} capacity")
    ax.set_xlabel("pipeline stage")
    ax.set_ylabel("GiB per device")
    ax.set_title(f"{e.model}: {describe_strategy(e.strategy)}", fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    try:
        figure.savefig(path, dpi=120)
    except OSError as error:
        raise InputError(f"cannot write '{path}': {error.strerror or error}") from None
