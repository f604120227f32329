"""transformers' own models against hpdsl's estimate of the same config: matmul FLOPs and saved bytes.

Scaled configs of Llama, Qwen2, Mixtral, Qwen3-MoE, DeepSeek-V3 (MLA) and T5
are built by transformers (bench/hf_measure.py) with `attn_implementation`
"sdpa" and "eager", cast to bf16 and run forward once on CPU with labels. The
same config is imported with `hpdsl.importers.hf` and estimated with every
degree 1, no recompute and `--impl hf-sdpa` / `--impl hf-eager`. Per
architecture and layer kind (the last layer of each kind: what earlier layers
saved first, the rotary tables, is theirs), and for the output layer:

- forward matmul FLOPs (FlopCounterMode) beside hpdsl.cost.formulas.flops.MATMUL_TERMS;
- saved bytes (saved_tensors_hooks, each storage once, parameters excluded)
  beside hpdsl.cost.formulas.memory's per-layer bytes under the implementation.

    .venv/bin/python bench/validate_hf.py [--batch 2] [--seq-len 64] [--arch ...]
    .venv/bin/python bench/validate_hf.py --full-size   # Llama-2-7B, Mixtral-8x7B: fake, s 4096
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_measure import OUTPUT, build, inputs_for, measure  # noqa: E402  (beside this script)

from hpdsl.api import compile_sources  # noqa: E402
from hpdsl.bound.bind import CostModel, bind  # noqa: E402
from hpdsl.cost.facts.columns import model_columns  # noqa: E402
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.formulas.context import context  # noqa: E402
from hpdsl.cost.formulas.flops import MATMUL_TERMS, forward_flops_by_term  # noqa: E402
from hpdsl.cost.formulas.memory import activation, column_act_coeffs  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.ir.nodes import evolve  # noqa: E402
from hpdsl.model.strategy import Strategy  # noqa: E402

SMALL = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
         "intermediate_size": 512, "vocab_size": 512, "num_hidden_layers": 2,
         "max_position_embeddings": 512}
"""The shared scale: hidden 256, 4 query and 2 kv heads of 64, two layers, a 512-token vocabulary."""

CONFIGS: dict[str, tuple[dict[str, Any], bool]] = {
    "llama": ({"model_type": "llama", **SMALL}, False),
    "qwen2": ({"model_type": "qwen2", **SMALL}, False),
    "mixtral": ({"model_type": "mixtral", **SMALL, "intermediate_size": 128, "num_local_experts": 8,
                 "num_experts_per_tok": 2}, False),
    "qwen3_moe": ({"model_type": "qwen3_moe", **SMALL, "moe_intermediate_size": 128, "num_experts": 8,
                   "num_experts_per_tok": 2, "decoder_sparse_step": 1, "mlp_only_layers": [],
                   "norm_topk_prob": True}, False),
    "deepseek_v3": ({"model_type": "deepseek_v3", **{k: v for k, v in SMALL.items() if k != "head_dim"},
                     "num_key_value_heads": 4,
                     "moe_intermediate_size": 128, "n_routed_experts": 8, "num_experts_per_tok": 2,
                     "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
                     "q_lora_rank": 128, "kv_lora_rank": 64, "qk_rope_head_dim": 32,
                     "qk_nope_head_dim": 64, "v_head_dim": 64, "num_hidden_layers": 3}, False),
    "qwen3_next": ({"model_type": "qwen3_next", **SMALL, "moe_intermediate_size": 128, "num_experts": 8,
                    "num_experts_per_tok": 2, "shared_expert_intermediate_size": 128,
                    "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
                    "num_hidden_layers": 4, "full_attention_interval": 4,
                    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 64,
                    "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4}, False),
    "t5": ({"model_type": "t5", "d_model": 256, "d_kv": 64, "num_heads": 4, "d_ff": 512,
            "num_layers": 2, "num_decoder_layers": 2, "vocab_size": 512, "dropout_rate": 0.0,
            "feed_forward_proj": "relu", "tie_word_embeddings": False}, True),
}
"""Scaled configs, keyed by architecture: (config.json mapping, encoder-decoder)."""

FULL: dict[str, tuple[dict[str, Any], bool]] = {
    "llama2_7b": ({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                   "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000,
                   "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "num_hidden_layers": 32}, False),
    "mixtral_8x7b": ({"model_type": "mixtral", "hidden_size": 4096, "num_attention_heads": 32,
                      "num_key_value_heads": 8, "intermediate_size": 14336, "num_local_experts": 8,
                      "num_experts_per_tok": 2, "vocab_size": 32000, "max_position_embeddings": 32768,
                      "rope_theta": 1e6, "sliding_window": None, "rms_norm_eps": 1e-5,
                      "num_hidden_layers": 32}, False),
}
"""Llama-2-7B's and Mixtral-8x7B's config.json, all 32 layers, measured under FakeTensorMode:
shapes only, no memory, no arithmetic (about 3 s per forward pass on one core)."""

DEFAULT = list(CONFIGS)
"""The architectures docs/validation.md tabulates (Qwen3-Next's linear attention runs transformers'
torch fallback where FLA is not installed)."""

IMPLS = {"sdpa": "hf-sdpa-cpu", "eager": "hf-eager"}
"""transformers' attn_implementation → hpdsl's --impl of the same kernels: SDPA measured on CPU is
priced with SDPA's CPU kernels (the math kernel where CPU flash cannot run; --impl hf-sdpa prices
a GPU's fused kernels, shown beside it where they differ)."""


@attrs.frozen
class Row:
    """One measured quantity of one part beside hpdsl's estimate."""

    arch: str
    impl: str
    part: str          # "model", a layer kind with its path, or "output"
    quantity: str      # "forward matmul FLOPs" | "saved bytes"
    measured: float
    estimated: float
    note: str = ""

    @property
    def relative(self) -> float:
        """Return (measured − estimated) / estimated."""
        return (self.measured - self.estimated) / self.estimated if self.estimated else float("inf")


def hpdsl_cost_model(arch: str, config: Mapping[str, Any]) -> CostModel:
    """Return hpdsl's bound model of a transformers config, imported as `hpdsl import-hf` does."""
    stdlib = compile_sources([], stdlib=True)
    imported = import_hf_config(config, profiles=stdlib.profiles, name=arch)
    registry = compile_sources([Source(f"{arch}.hpf", imported.text)], stdlib=True)
    model, profile = registry.model(arch), registry.profile(registry.model(arch).profile)
    # No dropout masks: the configs train without dropout (a CPU dropout keeps its mask at
    # compute width, a GPU one in one byte).
    return bind(model, attrs.evolve(profile, run=evolve(profile.run, dropout_bytes=0)))


def estimated_bytes(cost: CostModel, impl: str, batch: int, seq_len: int) -> dict[str, float]:
    """Return hpdsl's saved bytes per micro-batch by column name (every degree 1, no recompute, bf16)."""
    columns = model_columns(cost)
    strategy = Strategy(micro_batch=batch, seq_len=seq_len, impl=impl)
    x = context(StrategyGrid.from_strategies([strategy]), cost.profile.run)
    return {c.name: float(activation(column_act_coeffs(c, columns), x)[0][0])
            for c in columns.columns if c.role in ("layer", "output")}


def layer_kinds(cost: CostModel) -> list[str]:
    """Return the column name of every body layer, in model order."""
    return [g.kind or "layer" for g in cost.groups if not g.mtp for _ in range(g.count)]


def compare(arch: str, *, batch: int = 2, seq_len: int = 64) -> list[Row]:
    """Return the rows of one architecture, both implementations (a FULL one measured fake)."""
    fake = arch in FULL
    config, seq2seq = (FULL if fake else CONFIGS)[arch]
    cost = hpdsl_cost_model(arch, config)
    kinds = layer_kinds(cost)
    flops = forward_flops_by_term(cost, batch=batch, seq_len=seq_len)
    rows: list[Row] = []
    for hf_impl, impl in IMPLS.items():
        with FakeTensorMode() if fake else contextlib.nullcontext():
            model = build(config, hf_impl, torch.bfloat16, seq2seq, fake=fake)
            measured = measure(model, inputs_for(model, cost.model.vocab, batch, seq_len, seq2seq))
        assert len(measured.layers) == len(kinds), (measured.layers, kinds)
        estimate = estimated_bytes(cost, impl, batch, seq_len)
        gpu = estimated_bytes(cost, "hf-sdpa", batch, seq_len) if impl == "hf-sdpa-cpu" else estimate

        def matmul(column: str) -> float:
            return sum(flops[column].get(t, 0.0) for t in MATMUL_TERMS)

        rows.append(Row(arch, impl, "model", "forward matmul FLOPs", measured.flops[""],
                        sum(matmul(k) for k in kinds) + matmul("output")))
        last = {kind: path for path, kind in zip(measured.layers, kinds)}
        for kind, path in last.items():
            part = f"{kind} ({path})"
            rows.append(Row(arch, impl, part, "forward matmul FLOPs", measured.flops.get(path, 0.0),
                            matmul(kind)))
            note = _note(cost, kind, measured.kernels(path), estimate[kind], gpu[kind])
            if fake and impl == "hf-sdpa-cpu" and not note:  # which kernel CPU dispatch chose for fake tensors
                note = f"CPU SDPA: {' + '.join(measured.kernels(path))} (fake)"
            rows.append(Row(arch, impl, part, "saved bytes", measured.saved.get(path, 0), estimate[kind], note))
        rows.append(Row(arch, impl, OUTPUT, "saved bytes", measured.saved.get(OUTPUT, 0), estimate["output"]))
    return rows


def _note(cost: CostModel, kind: str, kernels: tuple[str, ...], estimate: float, gpu: float) -> str:
    """Return the kernels a saved-bytes row ran where they are not a GPU's, and hf-sdpa's GPU estimate."""
    if cost.kind_config(None if kind == "layer" else kind).attn_kind == "linear":
        return "transformers' torch fallback of the delta rule (FLA not installed)"
    if gpu != estimate:
        return f"CPU SDPA: {' + '.join(kernels)}; hf-sdpa (GPU, fused kernels) {gpu:,.0f}"
    return ""


def format_table(rows: Sequence[Row]) -> str:
    """Return the rows as a Markdown table."""
    lines = ["| model | impl | part | quantity | measured | estimated | difference | note |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | --- |"]
    lines += [f"| {r.arch} | {r.impl} | {r.part} | {r.quantity} | {r.measured:,.0f} | {r.estimated:,.0f} | "
              f"{r.relative:+.2%} | {r.note} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batch", type=int, help="micro-batch (2; 1 with --full-size)")
    parser.add_argument("--seq-len", type=int, help="sequence length (64; 4096 with --full-size)")
    parser.add_argument("--arch", nargs="+", choices=[*CONFIGS, *FULL])
    parser.add_argument("--full-size", action="store_true",
                        help="the FULL configs under FakeTensorMode (default micro-batch 1, sequence 4096)")
    args = parser.parse_args()
    if args.full_size:
        args.arch = args.arch or list(FULL)
        args.batch, args.seq_len = args.batch or 1, args.seq_len or 4096
    args.arch, args.batch, args.seq_len = args.arch or DEFAULT, args.batch or 2, args.seq_len or 64
    torch.set_num_threads(1)
    start = time.perf_counter()
    rows = [row for arch in args.arch for row in compare(arch, batch=args.batch, seq_len=args.seq_len)]
    print(f"transformers {transformers_version()}, torch {torch.__version__}, bf16, micro-batch "
          f"{args.batch}, sequence {args.seq_len} ({time.perf_counter() - start:.1f} s)\n")
    print(format_table(rows))


def transformers_version() -> str:
    """Return the installed transformers version."""
    import transformers

    return str(transformers.__version__)


if __name__ == "__main__":
    main()
