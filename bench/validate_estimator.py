"""Every example spec, built small and run forward, against the estimator: the tables of docs/validation.md.

For each examples/*.hpf model, `small_model` (bench/agreement.py) keeps its
structure (profile, kinds, flags, MoE / linear-attention / MLA blocks) at small
dimensions (hidden 256, 4 heads of 64, two layers per group), `build_model`
builds it, and one forward pass on CPU tensors measures:

- forward FLOPs with torch's FlopCounterMode, for the whole model and for the
  last layer of each kind, beside the estimator's matrix-product terms
  (hpdsl.cost.formulas.flops.MATMUL_TERMS of `forward_flops_by_term`);
- the bytes autograd saves for the backward in that layer (saved_tensors_hooks,
  each storage once, parameters excluded), beside
  `hpdsl.cost.formulas.memory.layer_activation_bytes` (every degree 1, no recompute,
  the dtype's byte widths, flash attention iff a fused kernel ran).

It prints one Markdown table per dtype (float32, then bfloat16).

    .venv/bin/python bench/validate_estimator.py [--batch 2] [--seq-len 128] [--dtype float32 bfloat16]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from agreement import format_table, validation_suite  # bench/agreement.py, beside this script

from hpdsl.api import compile_paths

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    """Print the agreement tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"],
                        choices=["float32", "bfloat16"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    registry = compile_paths([ROOT / "examples"])
    for name in args.dtype:
        start = time.perf_counter()
        rows = validation_suite(registry, dtype=getattr(torch, name), batch=args.batch,
                                seq_len=args.seq_len)
        print(f"### {name}: micro-batch {args.batch}, sequence {args.seq_len} "
              f"({time.perf_counter() - start:.1f} s)\n")
        print(format_table(rows))
        print()


if __name__ == "__main__":
    main()
