"""Scaled gpt-oss and Gemma-3 configs: transformers' own models under FlopCounterMode against hpdsl's count.

For each scaled config (published keys, small sizes) the user's path runs end to
end: `hpdsl import-hf` writes the spec, which is compiled and bound. Then one
forward pass of `batch` sequences of `seq_len` tokens on CPU is measured with
torch's FlopCounterMode (matrix products only, 2 per multiply-add):

- transformers' model with `attn_implementation="eager"` (and, for MoE,
  `experts_implementation="eager"`): its attention computes the whole s×s
  QKᵀ and A·V and masks after, sliding layers included, so it is held against
  hpdsl's forward matrix-product terms over the whole square
  (`forward_flops_by_term`, MATMUL_TERMS);
- hpdsl's own model of the imported spec (`build_model`, the attention
  family's eager backend), whose sliding layers compute only the band of w keys
  per query (hpdsl.torch.modules.common.banded_attention): held against the
  windowed count (`forward_flops_by_term(..., windowed=True)`), the model
  convention's min(s, w) keys per query.

docs/validation.md#sliding-window-layers-against-transformers tabulates the rows;
tests/torch/test_hf_flops.py requires every pair to be equal.

    .venv/bin/python bench/validate_hf_flops.py [--batch 2] [--seq-len 64]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import torch
from torch.utils.flop_counter import FlopCounterMode

from hpdsl.api import compile_paths
from hpdsl.bound.bind import bind
from hpdsl.cost.formulas.flops import MATMUL_TERMS, forward_flops_by_term
from hpdsl.ir.nodes import ModelIR
from hpdsl.registry import Registry

GPT_OSS = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "eos_token_id": 1, "experts_per_token": 2, "head_dim": 16, "hidden_act": "silu",
    "hidden_size": 64, "initial_context_length": 4096, "initializer_range": 0.02,
    "intermediate_size": 32, "layer_types": ["sliding_attention", "full_attention"] * 2,
    "max_position_embeddings": 256, "model_type": "gpt_oss", "num_attention_heads": 4,
    "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_key_value_heads": 2, "num_local_experts": 4,
    "output_router_logits": False, "pad_token_id": 0, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 16, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "use_cache": True, "vocab_size": 128,
}
"""gpt-oss-20b's config.json (tests/importers/hf_configs.py) scaled: sinks, biases, 4 experts top-2,
alternating sliding (window 16) and full layers."""

GEMMA3 = {
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid",
    "eos_token_id": [1, 3], "final_logit_softcapping": None, "head_dim": 16,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 64, "initializer_range": 0.02,
    "intermediate_size": 96, "max_position_embeddings": 256, "model_type": "gemma3_text",
    "num_attention_heads": 4, "num_hidden_layers": 6, "num_key_value_heads": 1, "pad_token_id": 0,
    "query_pre_attn_scalar": 16, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 16, "sliding_window_pattern": 3,
    "use_cache": True, "vocab_size": 128,
}
"""Gemma-3-1B's config.json scaled: QK-norm, sandwich norms, tied embeddings (no tie key, as published),
every third layer full (sliding_window_pattern 3), the rest sliding with window 16."""

CONFIGS = {"gpt_oss": GPT_OSS, "gemma3": GEMMA3}


@attrs.frozen
class HfFlops:
    """One scaled model's forward matrix-product FLOPs: measured and hpdsl's, both conventions."""

    model: str
    layer_types: tuple[str, ...]       # transformers' config.layer_types
    hpdsl_kinds: tuple[str, ...]       # the imported spec's kind of each layer
    transformers: float                # FlopCounterMode on transformers' eager model
    square: float                      # hpdsl: scores over the whole s×s square
    built: float                       # FlopCounterMode on hpdsl's built model (banded eager attention)
    windowed: float                    # hpdsl: sliding layers over min(s, w) keys per query
    by_op: dict[str, float] = attrs.field(factory=dict)  # transformers' count by aten op


def import_spec(name: str, config: dict[str, Any], workdir: Path) -> tuple[Registry, ModelIR]:
    """Run `hpdsl import-hf` on the config and compile the spec it writes."""
    (workdir / "config.json").write_text(json.dumps(config))
    done = subprocess.run([sys.executable, "-m", "hpdsl.cli", "import-hf", "config.json", "--name", name,
                           "-o", f"{name}.hpf"], cwd=workdir, capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"import-hf {name}: {done.stderr}")
    registry = compile_paths([workdir / f"{name}.hpf"])
    return registry, registry.models[name]


def hf_model(config: dict[str, Any]) -> Any:
    """Return transformers' model of the config on CPU, eager attention and eager experts."""
    import transformers

    hf_config = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(0)
    # The default experts kernel (grouped_mm) has no FlopCounterMode formula; the eager
    # one loops over the experts a batch reaches, one torch.mm per expert and matrix.
    return transformers.AutoModelForCausalLM.from_config(
        hf_config, attn_implementation="eager", experts_implementation="eager").eval()


def counted(model: torch.nn.Module, tokens: torch.Tensor) -> tuple[float, dict[str, float]]:
    """Return the FLOPs FlopCounterMode counts in one forward pass, total and by op."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(tokens)
    return float(counter.get_total_flops()), {str(op): float(n)
                                               for op, n in counter.get_flop_counts()["Global"].items()}


def hpdsl_count(registry: Registry, spec: ModelIR, *, batch: int, seq_len: int, windowed: bool) -> float:
    """Return hpdsl's forward matrix-product FLOPs of the whole model (every layer, the output layer)."""
    terms = forward_flops_by_term(bind(spec, registry.profile(spec.profile)), batch=batch,
                                  seq_len=seq_len, windowed=windowed)
    layers = sum(g.count * sum(terms[g.kind].get(t, 0.0) for t in MATMUL_TERMS) for g in spec.groups)
    return layers + sum(terms["output"][t] for t in MATMUL_TERMS if t in terms["output"])


def measure(name: str, *, batch: int = 2, seq_len: int = 64) -> HfFlops:
    """Import, build and measure one scaled config."""
    from hpdsl.torch import build_model

    config = CONFIGS[name]
    tokens = torch.randint(3, config["vocab_size"], (batch, seq_len), generator=torch.Generator().manual_seed(0))
    with tempfile.TemporaryDirectory() as tmp:
        registry, spec = import_spec(name, config, Path(tmp))
    hf = hf_model(config)
    measured, by_op = counted(hf, tokens)
    built = build_model(spec, registry=registry, device="cpu", selectors={"attention": {"backend": "eager"}})
    kinds = tuple(g.kind for g in spec.groups for _ in range(g.count))
    return HfFlops(
        model=name, layer_types=tuple(hf.config.layer_types), hpdsl_kinds=kinds,
        transformers=measured, square=hpdsl_count(registry, spec, batch=batch, seq_len=seq_len, windowed=False),
        built=counted(built, tokens)[0],
        windowed=hpdsl_count(registry, spec, batch=batch, seq_len=seq_len, windowed=True), by_op=by_op)


def format_rows(rows: list[HfFlops]) -> str:
    """Return the Markdown table of docs/validation.md."""
    lines = ["| model | layers (sliding / full) | transformers eager, measured | hpdsl, whole square | "
             "hpdsl built (banded), measured | hpdsl, windowed | equal |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        sliding = r.layer_types.count("sliding_attention")
        equal = r.transformers == r.square and r.built == r.windowed and r.layer_types == r.hpdsl_kinds
        lines.append(f"| {r.model} | {sliding} / {len(r.layer_types) - sliding} | {r.transformers:,.0f} | "
                     f"{r.square:,.0f} | {r.built:,.0f} | {r.windowed:,.0f} | {'yes' if equal else 'NO'} |")
    return "\n".join(lines)


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [measure(name, batch=args.batch, seq_len=args.seq_len) for name in CONFIGS]
    print(f"micro-batch {args.batch}, sequence {args.seq_len}, window {GPT_OSS['sliding_window']}\n")
    print(format_rows(rows))
    for r in rows:
        print(f"\n{r.model}: transformers by op " + ", ".join(f"{op} {n:,.0f}" for op, n in sorted(r.by_op.items())))


if __name__ == "__main__":
    main()
