"""A strategy grid, the profile's run facts and the device table into the float arrays pricing reads.

Everything here is one array per candidate (or a scalar from the run facts), so
each formula downstream is a plain numpy expression over the whole grid.
"""

from __future__ import annotations

import attrs
import numpy as np

from hpdsl.cost.devices import get_device
from hpdsl.cost.precision import OPTIMIZER_NAMES, PRECISION_NAMES, PRECISIONS, static_widths
from hpdsl.cost.strategy import IMPLS, StrategyGrid
from hpdsl.ir.nodes import RunFacts

F = np.ndarray


@attrs.frozen(eq=False)
class Ctx:
    """Strategy arrays (n,) as floats, run-fact scalars and per-axis bandwidths."""

    t: F
    sp: F
    cp: F
    ep: F
    etp: F
    dp: F
    pp: F
    vpp: F
    b: F
    s: F
    m: F
    batch: F
    tok: F            # tokens of one micro-batch per rank before tensor parallelism: s·b/cp
    loss_t: F         # what the logits are divided by: t with loss_parallel, else 1
    b_c: F
    b_sm: F
    b_p: F
    flash: np.ndarray
    hf: np.ndarray    # transformers' modules (hf-sdpa or hf-eager) save the activations
    eager: np.ndarray  # transformers' eager attention: expanded K and V, fp32 softmax and its copy
    any_hf: bool      # some candidate is priced as transformers' (else the hf terms are skipped)
    recompute: np.ndarray
    all_layers: np.ndarray
    recompute_layers: np.ndarray
    zero: np.ndarray
    ring: np.ndarray
    edp: F            # expert data-parallel degree: dp·cp·tp/(ep·etp)
    b_n: float
    b_d: float
    b_g: F
    b_o: F            # optimizer bytes per parameter: master copy, extra copies, states·state bytes
    overlapped_grad_reduce: bool
    flops: F          # achieved FLOP/s: peak·mfu
    bw_tp: F
    bw_cp: F
    bw_ep: F
    bw_dp: F
    bw_pp: F

    def zero_divisors(self, level: int) -> tuple[F, F]:
        """Return (dense, expert) shard counts of what ZeRO shards from `level` on (1, 2 or 3)."""
        on = self.zero >= level
        return np.where(on, self.dp * self.cp, 1.0), np.where(on, self.edp, 1.0)


def context(grid: StrategyGrid, run: RunFacts) -> Ctx:
    """Return the pricing arrays of `grid` under the profile's run facts."""
    f = {name: grid.arrays[name].astype(np.float64)
         for name in ("tp", "cp", "ep", "etp", "dp", "pp", "vpp", "micro_batch", "seq_len")}
    t, cp, dp, b, s = f["tp"], f["cp"], f["dp"], f["micro_batch"], f["seq_len"]
    sp_on = np.where(grid.sp < 0, int(run.shard_activations), grid.sp) > 0
    batch = np.where(grid.global_batch > 0, grid.global_batch, grid.micro_batch * grid.dp * grid.pp)
    m = np.maximum(batch // np.maximum(grid.micro_batch * grid.dp, 1), 1).astype(np.float64)
    table = [get_device(name) for name in grid.devices]
    dev = np.maximum(grid.device_id, 0)
    peak = np.array([d.peak_flops for d in table])[dev]
    intra = np.array([d.intra_node_bandwidth for d in table])[dev]
    inter = np.array([d.inter_node_bandwidth for d in table])[dev]
    per_node = np.array([d.devices_per_node for d in table])[dev]

    def bandwidth(span: F) -> F:
        return np.where(span <= per_node, intra, inter)

    ep, etp = f["ep"], f["etp"]
    widths = precision_widths(grid, run)
    # Eager attention keeps the score matrix whatever --flash says
    # (docs/cost-model.md#activations-per-implementation).
    eager = grid.impl == IMPLS.index("hf-eager")
    return Ctx(
        t=t, sp=np.where(sp_on, t, 1.0), cp=cp, ep=ep, etp=etp, dp=dp, pp=f["pp"], vpp=f["vpp"],
        b=b, s=s, m=m, batch=batch.astype(np.float64), tok=s * b / cp,
        loss_t=t if run.loss_parallel else np.ones_like(t),
        b_c=widths["compute"], b_sm=grid.softmax_bytes.astype(np.float64),
        b_p=widths["param"], flash=(grid.flash > 0) & ~eager, hf=grid.impl > 0, eager=eager,
        any_hf=bool(np.any(grid.impl > 0)),
        recompute=grid.recompute,
        all_layers=grid.recompute_layers == 0, recompute_layers=grid.recompute_layers,
        zero=grid.zero, ring=grid.cp_kind == 0, edp=dp * cp * t / (ep * etp),
        b_n=float(run.norm_bytes), b_d=float(run.dropout_bytes), b_g=widths["grad"],
        b_o=widths["optimizer"],
        overlapped_grad_reduce=run.overlapped_grad_reduce, flops=peak * grid.mfu,
        bw_tp=bandwidth(t), bw_cp=bandwidth(t * cp), bw_ep=bandwidth(ep * etp),
        bw_dp=bandwidth(t * cp * dp), bw_pp=bandwidth(2 * t * cp * dp))



def precision_widths(grid: StrategyGrid, run: RunFacts) -> dict[str, F]:
    """Return per-candidate bytes per parameter (param, grad, optimizer) and per saved activation (compute).

    Each (precision, optimizer) pair is looked up once in hpdsl/cost/precision.py;
    a strategy's stated param_bytes or compute_bytes (non-zero) wins over its precision's.
    """
    out = {name: np.zeros(len(grid)) for name in ("param", "grad", "optimizer", "compute")}
    prec, opt = np.maximum(grid.precision, 0), np.maximum(grid.optimizer, 0)
    pairs = np.unique(prec * len(OPTIMIZER_NAMES) + opt)  # a few codes: no Python loop over candidates
    for p_code, o_code in (divmod(int(code), len(OPTIMIZER_NAMES)) for code in pairs):
        at = (prec == p_code) & (opt == o_code)
        w = static_widths(PRECISION_NAMES[p_code], OPTIMIZER_NAMES[o_code], run)
        out["grad"][at], out["optimizer"][at] = w.grad, w.optimizer
        out["param"][at], out["compute"][at] = w.param, PRECISIONS[PRECISION_NAMES[p_code]].compute
    out["param"] = np.where(grid.param_bytes > 0, grid.param_bytes, out["param"]).astype(np.float64)
    out["compute"] = np.where(grid.compute_bytes > 0, grid.compute_bytes, out["compute"]).astype(np.float64)
    return out
