"""A strategy grid, the profile's run facts and the device table into the float arrays pricing reads.

Everything here is one array per candidate (or a scalar from the run facts), so
each formula downstream is a plain numpy expression over the whole grid.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import attrs
import numpy as np

from hpdsl.cost.facts.devices import (HOST_FACTS, attention_curve, device_facts, get_device, host_facts, link_facts,
                                      precision_peaks)
from hpdsl.cost.facts.grid import StrategyGrid, codes_of
from hpdsl.cost.facts.precision import OPTIMIZER_NAMES, PRECISION_NAMES, PRECISIONS, static_widths
from hpdsl.cost.formulas import xp
from hpdsl.cost.formulas.xp import Val
from hpdsl.ir.nodes import RunFacts
from hpdsl.model.strategy import IMPLS, ZERO, Strategy

F = Val


@attrs.frozen(eq=False)
class Ctx:
    """Strategy arrays (n,) as floats, run-fact scalars and per-axis bandwidths (one strategy: Python scalars)."""

    tp: F
    sp_shards: F      # what sequence parallelism splits activations into: tp with it, else 1
    cp: F
    ep: F
    etp: F
    dp: F
    pp: F
    vpp: F
    micro_batch: F    # sequences per micro-batch
    seq_len: F        # tokens per sequence
    micro_batches: F  # micro-batches per step per data-parallel rank
    batch: F          # sequences per step
    tokens: F         # tokens of one micro-batch per rank before tensor parallelism: seq_len·micro_batch/cp
    loss_shards: F    # what the logits are divided by: tp with loss_parallel, else 1
    compute_bytes: F  # bytes per saved activation
    softmax_bytes: F  # bytes per saved softmax element (without flash)
    param_bytes: F    # bytes per parameter (the weights)
    flash: Any                # bool array, or a bool
    hf: Any                   # transformers' modules (hf-sdpa or hf-eager) save the activations
    eager: Any                # transformers' eager attention: expanded K and V, the scores kept
    cpu: Any                  # hf-sdpa-cpu or the cpu_attention fact: SDPA's CPU kernels (math where CPU flash cannot)
    any_hf: bool              # some candidate is priced as transformers' (else the hf terms are skipped)
    recompute: Any            # int codes (RECOMPUTE), or an int
    all_layers: Any
    recompute_layers: Any
    zero: Any                 # int codes (ZERO), or an int
    ring: Any
    expert_dp: F      # expert data-parallel degree: dp·cp·tp/(ep·etp)
    norm_bytes: float      # bytes per saved norm input (a run fact)
    dropout_bytes: float   # bytes per dropout mask element (a run fact)
    grad_bytes: F     # bytes per gradient
    grads_held: Any           # gradients take memory (grad_accumulation, pp > 1 or several micro-batches)
    deferred: Any             # deferred_grad_accumulation with several micro-batches: reduced once, after the last
    optimizer_bytes: F  # optimizer bytes per parameter: master copy, extra copies, states·state bytes
    overlapped_grad_reduce: bool
    summed_grads: bool  # not fused_grad_accumulation: micro-batches after the first add their gradients, memory-bound
    achieved_flops: F  # achieved FLOP/s: peak·mfu (peak where mfu is 0, the device time model)
    peak: F           # dense peak FLOP/s of the precision's compute dtype (device time model: device_time.py)
    peak_mm: F        # dense peak FLOP/s of a layer's weight matmuls: fp8's under fp8-mixed, else `peak`
    fp8: Any          # fp8-mixed: the layers' linears cast their operands (hpdsl/cost/facts/casts.py)
    any_fp8: bool     # some candidate is fp8-mixed (else the cast terms are skipped)
    mem_bw: F         # memory bandwidth memory-bound kernels reach: bandwidth·memory_efficiency
    op_overhead: F    # host seconds per op, forward and backward (device model; 0 where the device states none;
                      # only read, and computed, where host_on)
    opt_bw: F         # bytes/s the optimizer step moves: optimizer_bandwidth, else mem_bw
    tensor_overhead: F  # host seconds per parameter tensor a step (device model): DTensor's under tp or dp > 1
    shard_overhead: F  # host seconds per FSDP2 unit and micro-batch (device model, ZeRO-3 over dp·cp > 1; else 0)
    comm_overlap: F   # share of an overlapped collective hidden behind compute (1 outside the device model)
    curves: Any       # ((mask, matmul curve), ...): each candidate's device's curve
    device_model: Any  # mfu 0 (the default): price with the device's matmul curve and bandwidth, not peak·mfu
    bw_tp: F
    bw_cp: F
    bw_ep: F
    bw_dp: F
    bw_pp: F
    lat_tp: F         # seconds per message step on each axis' tier (device model; 0 without a cluster)
    lat_cp: F
    lat_ep: F
    lat_dp: F
    lat_pp: F
    tree_tp: Any      # the axis' all-reduce runs as a tree (2·ceil(log2 n) steps), not a ring (2(n − 1))
    tree_dp: Any
    latency_on: bool  # some candidate's machine states a latency (a cluster): latency terms are priced
    host_on: bool = False  # some candidate's device states an op_overhead: the host term is priced
    call_s: F = 0.0   # host seconds per eager aten call (device model; 0 where the device states none; eager_on)
    eager_bw: F = 1.0  # bytes/s eager elementwise kernels move
    dtensor_extra: F = 0.0  # what DTensor adds to an op's host time under tp > 1 (dtensor_op − op overhead; eager_on)
    eager_on: bool = False  # some candidate's device states a call_overhead: columns price their eager terms
    att_curves: Any = ()  # ((mask, attention curve), ...): each candidate's device's attention-kernel curve

    def take(self, part: slice) -> Ctx:
        """Return this context's candidates at `part` (views of every array)."""
        curves = tuple((m[part] if isinstance(m, np.ndarray) else m, c) for m, c in self.curves)
        att = tuple((m[part] if isinstance(m, np.ndarray) else m, c) for m, c in self.att_curves)
        return attrs.evolve(self, curves=curves, att_curves=att, **{a.name: getattr(self, a.name)[part] for a in attrs.fields(Ctx)
                                                    if isinstance(getattr(self, a.name), np.ndarray)})

    def zero_divisors(self, level: int) -> tuple[F, F]:
        """Return (dense, expert) shard counts of what ZeRO shards from `level` on (1, 2 or 3)."""
        on = self.zero >= level
        return xp.where(on, self.dp * self.cp, 1.0), xp.where(on, self.expert_dp, 1.0)


def context(grid: StrategyGrid, run: RunFacts, links: Collection[str] | None = None) -> Ctx:
    """Return the pricing arrays of `grid` under the profile's run facts (of LINK_FIELDS only `links`, if given).

    A field of LINK_FIELDS left out is None, so a formula that comes to read one fails loudly.
    """
    f = {name: grid.arrays[name].astype(np.float64)
         for name in ("tp", "cp", "ep", "etp", "dp", "pp", "vpp", "micro_batch", "seq_len")}
    dev = np.maximum(grid.device_id, 0)
    used = np.flatnonzero(np.bincount(dev, minlength=len(grid.devices)))  # the devices used, in order (np.unique's)
    only = int(used[0]) if len(used) == 1 else None
    # One device on the whole grid (a search): only its facts are looked up, and they stay scalars, which
    # every formula broadcasts at the cost of one number rather than an array (the same float operations).
    names = grid.devices if only is None else (grid.devices[only],)
    at = 0 if only is not None else None

    def spread(values: list[Any]) -> Any:
        return values[at] if at is not None else np.array(values)[dev]

    table = [get_device(name) for name in names]
    link: dict[str, Any] = {key: spread([getattr(d, key) for d in table])
                            for key in ("peak_flops", "intra_node_bandwidth", "inter_node_bandwidth",
                                        "devices_per_node")}
    tiers = [link_facts(name) for name in names]
    link.update({key: spread([facts[key] for facts in tiers]) for key in tiers[0]})
    facts = [device_facts(name) for name in names]
    link["mem_bw"] = spread([f[0] for f in facts])
    host = [host_facts(name) for name in names]
    link.update({key: spread([h[k] for h in host]) for k, key in enumerate(HOST_FACTS)})
    link["peak"], link["peak_mm"] = grid_peaks(grid, dev)
    att = [attention_curve(name) for name in names]
    if at is not None:
        link["curves"], link["att_curves"] = ((True, facts[at][1]),), ((True, att[at]),)
    else:
        link["curves"] = tuple((dev == k, facts[int(k)][1]) for k in used) or ((True, facts[0][1]),)
        link["att_curves"] = tuple((dev == k, att[int(k)]) for k in used) or ((True, att[0]),)
    return _ctx(f, grid.arrays, precision_widths(grid, run), link, run, links)


def scalar_context(strategy: Strategy, run: RunFacts) -> Ctx:
    """Return the pricing floats of one (valid) strategy: the same Ctx, fields as Python scalars."""
    s = strategy
    # `* 1.0`, not float(): the fields may be traced values (hpdsl/cost/formulas/trace.py)
    f = {name: getattr(s, name) * 1.0 for name in ("tp", "cp", "ep", "etp", "dp", "pp", "vpp", "micro_batch",
                                                     "seq_len")}
    codes = codes_of(s, 0)
    d = get_device(s.device)
    mem_bw, curve = device_facts(s.device)
    link = {"peak_flops": d.peak_flops, "intra_node_bandwidth": d.intra_node_bandwidth,
            "inter_node_bandwidth": d.inter_node_bandwidth, "devices_per_node": d.devices_per_node,
            "mem_bw": mem_bw, "curves": ((True, curve),), "att_curves": ((True, attention_curve(s.device)),),
            **link_facts(s.device)}
    (_, link["peak_mm"]), (_, link["peak"]) = precision_peaks(s.device, s.precision)
    link.update(zip(HOST_FACTS, host_facts(s.device)))
    return _ctx(f, codes, scalar_widths(s, run), link, run)


ZERO3 = ZERO.index("os+grad+params")
"""The ZeRO code whose parameters FSDP2 shards (hpdsl/torch/parallelize.py)."""


def _ctx(f: dict[str, Any], g: dict[str, Any], widths: dict[str, Any], link: dict[str, Any],
         run: RunFacts, links: Collection[str] | None = None) -> Ctx:
    """Return the Ctx of float degrees `f`, grid codes `g` and device facts `link` (arrays or scalars)."""
    t, cp, dp, b, s = f["tp"], f["cp"], f["dp"], f["micro_batch"], f["seq_len"]
    sp_on = xp.where(g["sp"] < 0, int(run.shard_activations), g["sp"]) > 0
    batch = xp.where(g["global_batch"] > 0, g["global_batch"], g["micro_batch"] * g["dp"] * g["pp"])
    m = xp.maximum(batch // xp.maximum(g["micro_batch"] * g["dp"], 1), 1) * 1.0
    device_model = g["mfu"] == 0
    latency_on = bool(np.any(link["node_latency"]) or np.any(link["network_latency"]))
    ep, etp = f["ep"], f["etp"]
    # Eager attention keeps the score matrix whatever --flash says
    # (docs/cost-model.md#activations-per-implementation).
    eager = g["impl"] == IMPLS.index("hf-eager")
    fp8 = g["precision"] == PRECISION_NAMES.index("fp8-mixed")
    # The host and eager terms read their facts only where some device states them (device_time.py):
    # elsewhere (every shipped device) they are not computed at all.
    host_on, eager_on = bool(np.any(link["op_overhead"])), bool(np.any(link["call"]))
    return Ctx(
        tp=t, sp_shards=xp.where(sp_on, t, 1.0), cp=cp, ep=ep, etp=etp, dp=dp, pp=f["pp"], vpp=f["vpp"],
        micro_batch=b, seq_len=s, micro_batches=m, batch=batch * 1.0, tokens=s * b / cp,
        loss_shards=t if run.loss_parallel else xp.ones_like(t),
        compute_bytes=widths["compute"], softmax_bytes=g["softmax_bytes"] * 1.0,
        param_bytes=widths["param"], flash=(g["flash"] > 0) & (g["impl"] != IMPLS.index("hf-eager")),
        hf=g["impl"] > 0, eager=eager, cpu=(g["impl"] == IMPLS.index("hf-sdpa-cpu")) | run.cpu_attention, any_hf=bool(np.any(g["impl"] > 0)), recompute=g["recompute"],
        all_layers=g["recompute_layers"] == 0, recompute_layers=g["recompute_layers"],
        zero=g["zero"], ring=g["cp_kind"] == 0, expert_dp=dp * cp * t / (ep * etp),
        norm_bytes=float(run.norm_bytes), dropout_bytes=float(run.dropout_bytes), grad_bytes=widths["grad"],
        grads_held=run.grad_accumulation | (f["pp"] > 1) | (m > 1), deferred=run.deferred_grad_accumulation & (m > 1),
        optimizer_bytes=widths["optimizer"],
        overlapped_grad_reduce=run.overlapped_grad_reduce, summed_grads=not run.fused_grad_accumulation,
        achieved_flops=link["peak_flops"] * xp.where(g["mfu"] > 0, g["mfu"], 1.0), peak=link["peak"] * 1.0,
        peak_mm=link["peak_mm"] * 1.0, fp8=fp8, any_fp8=bool(np.any(fp8)),
        mem_bw=link["mem_bw"], curves=link["curves"], device_model=device_model, opt_bw=link["opt_bw"],
        latency_on=latency_on, host_on=host_on, eager_bw=link["eager_bw"], eager_on=eager_on,
        att_curves=link["att_curves"],
        **_links(f, g, link, (sp_on, device_model, latency_on, host_on, eager_on), links))


LINK_FIELDS = ("op_overhead", "shard_overhead", "comm_overlap", "tensor_overhead", "bw_tp", "bw_cp", "bw_ep",
               "bw_dp", "bw_pp", "lat_tp", "lat_cp", "lat_ep", "lat_dp", "lat_pp", "tree_tp", "tree_dp", "call_s",
               "dtensor_extra")
"""The context's per-axis link and host fields: `context` computes only those a caller asks for."""


def _links(f: dict[str, Any], g: dict[str, Any], link: dict[str, Any], flags: tuple[Any, ...],
           fields: Collection[str] | None) -> dict[str, Any]:
    """Return the LINK_FIELDS in `fields` (None: all), the others None: bandwidths, latencies and host terms."""
    t, cp, dp, ep, etp = f["tp"], f["cp"], f["dp"], f["ep"], f["etp"]
    sp_on, device_model, latency_on, host_on, eager_on = flags
    per_node, intra, inter = (link["devices_per_node"], link["intra_node_bandwidth"],
                              link["inter_node_bandwidth"])
    # Grid-wide: every candidate on the device time model lets a term skip what np.where would throw away.
    every_device_model = isinstance(device_model, np.ndarray) and bool(np.all(device_model))

    def bandwidth(span: Val) -> Val:
        return xp.where(span <= per_node, intra, inter)

    def tier(span: Val, fact: str) -> Val:
        return xp.where(span <= per_node, link[f"node_{fact}"], link[f"network_{fact}"])

    def collective(span: Val, *kinds: str) -> Val:
        """Return the device model's bandwidth of `kinds` run in equal volume (harmonic mean), else the old one."""
        reached = tier(span, kinds[0]) if len(kinds) == 1 else len(kinds) / sum(1.0 / tier(span, k) for k in kinds)
        return reached if every_device_model else xp.where(device_model, reached, bandwidth(span))

    def latency(span: Val) -> Val:
        if not latency_on:  # no tier states one: zero throughout
            return xp.zeros_like(span * 1.0)
        return xp.where(device_model, tier(span, "latency"), 0.0)

    dp_span = t * cp * dp
    terms: dict[str, Callable[[], Any]] = {
        # Under tp a layer's linears are DTensors: each of its ops dispatches at the device's dtensor_op_overhead.
        "op_overhead": lambda: (xp.where(device_model, xp.where(t > 1, link["dtensor_op"], link["op_overhead"]), 0.0)
                                if host_on else 0.0),
        # FSDP2 units (ZeRO-3 over dp·cp > 1): each all-gathers and reduce-scatters once a micro-batch.
        "shard_overhead": lambda: xp.where(device_model, xp.where((g["zero"] == ZERO3) & (cp * dp > 1), link["shard"],
                                                                  0.0), 0.0),
        "comm_overlap": lambda: xp.where(device_model, link["overlap"], 1.0),
        # FSDP2 (dp) and the tp plan make every parameter a DTensor, whose optimizer ops dispatch through it
        "tensor_overhead": lambda: xp.where(device_model, xp.where(t * cp * dp > 1, link["dtensor"], link["tensor"]),
                                            0.0),
        # Each axis at its collectives' efficiency (docs/cost-model.md#the-device-time-model): tp all-gathers
        # and reduce-scatters under sp, else all-reduces; cp's ring sends p2p, Ulysses swaps all-to-all; the
        # MoE dispatch is all-to-all on the ep axis' tier; dp all-reduces, or reduce-scatters and all-gathers.
        "bw_tp": lambda: xp.where(sp_on, collective(t, "all_gather", "reduce_scatter"), collective(t, "all_reduce")),
        "bw_cp": lambda: xp.where(g["cp_kind"] == 0, collective(t * cp, "p2p"), collective(t * cp, "all_to_all")),
        "bw_ep": lambda: collective(ep * etp, "all_to_all"),
        "bw_dp": lambda: xp.where(g["zero"] == 0, collective(dp_span, "all_reduce"),
                                  collective(dp_span, "reduce_scatter", "all_gather")),
        "bw_pp": lambda: collective(2 * t * cp * dp, "p2p"),
        "lat_tp": lambda: latency(t), "lat_cp": lambda: latency(t * cp), "lat_ep": lambda: latency(ep * etp),
        "lat_dp": lambda: latency(dp_span), "lat_pp": lambda: latency(2 * t * cp * dp),
        "tree_tp": lambda: tier(t, "tree") > 0, "tree_dp": lambda: tier(dp_span, "tree") > 0,
        "call_s": lambda: xp.where(device_model, link["call"], 0.0) if eager_on else 0.0,
        "dtensor_extra": lambda: (xp.where(device_model & (t > 1), link["dtensor_op"] - link["op_overhead"], 0.0)
                                  if eager_on else 0.0)}
    return {name: term() if fields is None or name in fields else None for name, term in terms.items()}


def grid_peaks(grid: StrategyGrid, dev: np.ndarray) -> tuple[Any, Any]:
    """Return per candidate the peaks its precision prices at on its device: (compute dtype's, weight matmuls')."""
    peak, peak_mm = np.zeros(len(grid)), np.zeros(len(grid))
    prec = np.maximum(grid.precision, 0)
    codes = np.flatnonzero(np.bincount(dev * len(PRECISION_NAMES) + prec))  # a few pairs, in order
    if len(codes) == 1:  # one device and precision on the whole grid (a search): scalars, as context's facts
        d, p = divmod(int(codes[0]), len(PRECISION_NAMES))
        (_, mm), (_, compute) = precision_peaks(grid.devices[d], PRECISION_NAMES[p])
        return compute, mm
    for code in codes:
        d, p = divmod(int(code), len(PRECISION_NAMES))
        at = (dev == d) & (prec == p)
        (_, peak_mm[at]), (_, peak[at]) = precision_peaks(grid.devices[d], PRECISION_NAMES[p])
    return peak, peak_mm


def scalar_widths(strategy: Strategy, run: RunFacts) -> dict[str, float]:
    """Return one strategy's bytes per parameter and per saved activation, as precision_widths does."""
    w = static_widths(strategy.precision, strategy.optimizer, run)
    return {"grad": float(w.grad), "optimizer": float(w.optimizer),
            "param": float(strategy.param_bytes or w.param),
            "compute": float(strategy.compute_bytes or PRECISIONS[strategy.precision].compute)}


WIDTH_FIELDS = ("precision", "optimizer", "param_bytes", "compute_bytes")
"""The grid fields a candidate's widths (precision_widths) are found from."""


def precision_widths(grid: StrategyGrid, run: RunFacts) -> dict[str, np.ndarray]:
    """Return per-candidate bytes per parameter (param, grad, optimizer) and per saved activation (compute).

    Each (precision, optimizer) pair is looked up once in hpdsl/cost/facts/precision.py;
    a strategy's stated param_bytes or compute_bytes (non-zero) wins over its precision's.
    """
    if len(grid) > 1 and all(grid.arrays[k].strides == (0,) for k in WIDTH_FIELDS):
        # One value of each on the whole grid (a search's fixed choices): found once, then repeated.
        return {k: np.full(len(grid), v) for k, v in _first_widths(grid, run).items()}
    out = {name: np.zeros(len(grid)) for name in ("param", "grad", "optimizer", "compute")}
    prec, opt = np.maximum(grid.precision, 0), np.maximum(grid.optimizer, 0)
    pairs = np.flatnonzero(np.bincount(prec * len(OPTIMIZER_NAMES) + opt))  # a few codes, in order (np.unique's)
    for p_code, o_code in (divmod(int(code), len(OPTIMIZER_NAMES)) for code in pairs):
        at = (prec == p_code) & (opt == o_code)
        w = static_widths(PRECISION_NAMES[p_code], OPTIMIZER_NAMES[o_code], run)
        out["grad"][at], out["optimizer"][at] = w.grad, w.optimizer
        out["param"][at], out["compute"][at] = w.param, PRECISIONS[PRECISION_NAMES[p_code]].compute
    out["param"] = np.where(grid.param_bytes > 0, grid.param_bytes, out["param"]).astype(np.float64)
    out["compute"] = np.where(grid.compute_bytes > 0, grid.compute_bytes, out["compute"]).astype(np.float64)
    return out


def _first_widths(grid: StrategyGrid, run: RunFacts) -> dict[str, float]:
    """Return the first candidate's widths as precision_widths finds them (the same lookups and conversions)."""
    p_code, o_code = max(int(grid.precision[0]), 0), max(int(grid.optimizer[0]), 0)
    w = static_widths(PRECISION_NAMES[p_code], OPTIMIZER_NAMES[o_code], run)
    param, compute = int(grid.param_bytes[0]), int(grid.compute_bytes[0])
    return {"param": float(param if param > 0 else w.param), "grad": float(w.grad),
            "optimizer": float(w.optimizer),
            "compute": float(compute if compute > 0 else PRECISIONS[PRECISION_NAMES[p_code]].compute)}
