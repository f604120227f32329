#!/usr/bin/env bash
# One-GPU check of `hpdsl train` (docs/trainer.md, "The GPU check"): a scaled Llama-3-8B and a scaled
# Mixtral-8x7B, each trained 8 steps on one GPU in bf16-mixed (FSDP2's MixedPrecisionPolicy over a one-rank
# mesh), measured peak memory (torch.cuda.max_memory_allocated) and step time printed beside the estimate.
# Both keep the published widths (hidden, heads, ffn, experts, vocab) and cut the layers: 4 of Llama's 32
# (about 1.9 B parameters, 30 GB of weights, gradients and moments), 2 of Mixtral's 32 (about 3.1 B, 50 GB):
# under 10 minutes on one H100/H200. `bench/gpu_check.sh --cpu` runs the very same path on the CPU (gloo) with
# narrow models, to check the script where there is no GPU.
#
#   bench/gpu_check.sh                 # GPU: --device cuda, priced as an H200 (GPU=h100 to price an H100)
#   bench/gpu_check.sh --cpu           # CPU stand-in: the same commands, scaled down
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${OUT:-$(mktemp -d)}
if [[ "${1:-}" == "--cpu" ]]; then
  DEVICE=cpu; SEQ=64; STEPS=3
  LLAMA=(layers=2 hidden=128 heads=4 kv_heads=1 ffn_width=448 vocab=1024)
  MIXTRAL=(layers=2 hidden=128 heads=4 kv_heads=1 ffn_width=448 expert_width=448 vocab=1024)
else
  DEVICE=cuda; SEQ=4096; STEPS=8
  LLAMA=(layers=4)
  MIXTRAL=(layers=2)
fi
run() {  # NAME SPEC SETS...
  local name=$1 spec=$2; shift 2
  local sets=(); for pair in "$@"; do sets+=("--set=$pair"); done
  "$PY" -m hpdsl train "examples/$spec.hpf" "${sets[@]}" --device "$DEVICE" --nproc 1 --precision bf16-mixed \
    --zero os+grad+params --gpu "${GPU:-h200}" --seq-len "$SEQ" --global-batch 1 --steps "$STEPS" --timeout 540 \
    --json > "$OUT/$name.json"
}
run llama3_8b llama3_8b "${LLAMA[@]}"
run mixtral_8x7b mixtral_8x7b "${MIXTRAL[@]}"
"$PY" - "$OUT" "$DEVICE" <<'PY'
import json, statistics, sys
from pathlib import Path
out, device = Path(sys.argv[1]), sys.argv[2]
print(f"{'model':<14}{'peak GiB':>10}{'est. GiB':>10}{'ratio':>7}{'step s':>9}{'est. s':>10}{'ratio':>9}"
      f"{'tok/s':>10}{'MFU':>8}{'est.':>8}   (device {device}; CPU peak is the resident set)")
for name in ("llama3_8b", "mixtral_8x7b"):
    result = json.loads((out / f"{name}.json").read_text())
    steady = result["metrics"][1:] or result["metrics"]  # the first step includes one-off setup
    peak = max(max(m["peak_memory_bytes"]) for m in result["metrics"])
    estimated = max(rank["estimated"]["total_bytes"] for rank in result["ranks"])
    step = statistics.median(m["step_time_s"] for m in steady)
    est = steady[0]["estimated_step_time_s"]
    tokens = statistics.median(m["tokens_per_s"] for m in steady)
    mfu, est_mfu = statistics.median(m["mfu"] for m in steady), steady[0]["estimated_mfu"]
    # .3g: on the CPU stand-in the GPU's estimated step is microseconds, its ratio thousands.
    print(f"{name:<14}{peak / 2**30:>10.2f}{estimated / 2**30:>10.2f}{peak / estimated:>7.2f}{step:>9.3g}{est:>10.3g}"
          f"{step / est:>9.3g}{tokens:>10,.0f}{mfu:>8.1%}{est_mfu:>8.1%}")
    static = {p: (result["ranks"][0]["measured"][p], result["ranks"][0]["estimated"][p])
              for p in ("params_bytes", "grads_bytes", "optimizer_bytes")}
    print(" " * 14 + "  ".join(f"{p.removesuffix('_bytes')} {m / 2**30:.2f}/{e / 2**30:.2f} GiB"
                               for p, (m, e) in static.items()))
PY
