"""`hpdsl train`'s readable report: the losses and metrics per step, then every rank's bytes beside the estimate."""

from __future__ import annotations

import math
from typing import Any

_PARTS = ("params_bytes", "grads_bytes", "optimizer_bytes", "activation_peak_bytes")


def percent(share: float) -> str:
    """Return a share as a percentage with two significant digits: a CPU's MFU of 0.004 % is not "0.00 %"."""
    if share == 0.0 or abs(share) >= 0.01:
        return f"{share:.2%}"
    return f"{share * 100:.2g}%"


def render_train(name: str, strategy: Any, result: dict[str, Any]) -> str:
    """Return the readable report: losses per step beside the reference, then bytes per rank."""
    s = strategy
    stages = (f"pp {s.pp}, vpp {s.vpp} ({s.micro_batches} micro-batches), " if s.pp > 1
              else f"{s.micro_batches} micro-batches accumulated, " if s.micro_batches > 1 else "")
    etp = f", etp {s.etp}" if s.etp > 1 else ""
    device = "NCCL" if result.get("device") == "cuda" else "gloo"
    lines = [f"{name}: {stages}dp {s.dp}, tp {s.tp}, cp {s.cp}, ep {s.ep}{etp}, zero {s.zero}, recompute {s.recompute}; "
             f"{len(result['ranks'])} processes ({device}), seq {s.seq_len}, micro-batch {s.micro_batch}, "
             f"{s.precision}"]
    reference = result.get("reference_loss")
    lines.append("step        loss   grad_norm    tokens/s   MFU (est.)" + ("   one process" if reference else ""))
    metrics = result.get("metrics") or [{} for _ in result["loss"]]
    for step, (loss, m) in enumerate(zip(result["loss"], metrics)):
        row = (f"{m.get('step', step):>4} {loss:>11.6f} {m.get('grad_norm', float('nan')):>11.4g} "
               f"{m.get('tokens_per_s', 0.0):>11,.0f}   {percent(m.get('mfu', 0.0))} ({percent(m.get('estimated_mfu', 0.0))})")
        if reference:
            ref = reference[step]
            row += f"   {ref:>11.6f} diff {abs(loss - ref):.1e}"
        lines.append(row)
    lines.append("rank coords        " + "".join(f"{p.removesuffix('_bytes'):>26}" for p in _PARTS))
    lines.append(" " * 19 + "".join(f"{'measured / estimated':>26}" for _ in _PARTS))
    for rank in result["ranks"]:
        coords = ",".join(str(v) for v in rank["coords"].values())
        cells = "".join(f"{rank['measured'][p]:>12,} / {rank['estimated'][p]:>11,.0f}" for p in _PARTS)
        lines.append(f"{rank['rank']:>4} {coords:<13}{cells}")
    held = [r for r in result["ranks"] if "held_grads_bytes" in r["measured"]]
    if held:
        lines.append("gradient bytes held between micro-batches, measured / estimated: " + ", ".join(
            f"rank {r['rank']} {r['measured']['held_grads_bytes']:,} / {r['estimated']['held_grads_bytes']:,.0f}"
            for r in held))
    if metrics and metrics[-1].get("peak_memory_bytes"):
        kind = "CUDA allocator peak" if result.get("device") == "cuda" else "peak resident set"
        lines.append(f"peak memory per rank ({kind}): " + ", ".join(
            f"rank {i} {peak / 2**20:,.0f} MiB" for i, peak in enumerate(metrics[-1]["peak_memory_bytes"])))
    gaps = [r["measured"]["grad_max_diff"] for r in result["ranks"] if "grad_max_diff" in r["measured"]]
    if gaps:
        scale = max(r["measured"]["grad_max_abs"] for r in result["ranks"])
        # A NaN gap is a NaN gradient (hpdsl/torch/validate.py `worst`): said, not lost to max's ordering.
        gap = math.nan if any(math.isnan(g) for g in gaps) else max(gaps)
        lines.append(f"gradients after step 0 against one process: max |diff| {gap:.1e} "
                     f"(largest gradient {scale:.1e})" + ("; a gradient is NaN" if math.isnan(gap) else ""))
    return "\n".join(lines)


def not_finite(losses: list[float]) -> int | None:
    """Return the first step whose loss is NaN or infinite (None: every loss is a number)."""
    return next((step for step, loss in enumerate(losses) if not math.isfinite(loss)), None)
