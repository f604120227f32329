"""Build Qwen3-Next-shaped and DeepSeek-V3-shaped small models from .hpf specs, train a step, show provenance.

    python examples/train_step.py [--steps 2] [--full-size]

The specs below are the real examples (examples/qwen3_next_80b_a3b.hpf,
examples/deepseek_v3.hpf) shrunk to a few layers and small widths. Each model
is built by hpdsl's torch backend on a one-process gloo DeviceMesh: every
attention, feed-forward and expert slot is resolved through its module family
against the mesh, so the printed provenance says which family, variant and
rule produced each module and where in the .hpf files they are declared.
--full-size also builds the full-size models on the meta device (never
allocated) and compares their parameter counts with the estimator's.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh

from hpdsl.api import compile_paths, compile_sources
from hpdsl.cost import bind, parameters
from hpdsl.diagnostics import Source
from hpdsl.registry import Registry
from hpdsl.torch import build_model, collect_family_modules, explain_module, materialize

SMALL_SPECS = """
model qwen3_next_small : qwen3_5 {
  hidden 128  layers 4  heads 4  kv_heads 2  head_dim 32  vocab 512  ffn_width 256
  tie_embeddings false  qkv_bias false  o_bias false  mlp_bias false
  qk_norm  output_gate  norm rmsnorm  norm_bias false  mlp gated  activation silu
  moe { experts 8  top_k 2  expert_width 64  shared_experts 1  shared_width 64  shared_gate  router_bias false }
  linear { key_heads 2  key_head_dim 32  value_heads 4  value_head_dim 32  conv 4 }
  stack [linear_attention * 3, full_attention]
  mtp 1
}

model deepseek_v3_small : deepseek {
  hidden 128  layers 3  heads 4  kv_heads 4  vocab 512  ffn_width 256  first_k_dense 1  mtp 1
  tie_embeddings false  qkv_bias false  o_bias false  mlp_bias false
  qk_norm false  output_gate false  norm rmsnorm  norm_bias false  mlp gated  activation silu
  mla { q_lora_rank 64  kv_lora_rank 32  rope_dim 16  nope_dim 32  v_head_dim 32 }
  moe { experts 8  top_k 2  expert_width 64  shared_experts 1  shared_gate false  router_bias false }
}
"""

EXPLAINED = {
    "qwen3_next_small": ("layers.0.mixer", "layers.3.mixer", "layers.1.ffn.experts", "layers.0.ffn"),
    "deepseek_v3_small": ("layers.0.mixer", "layers.0.ffn", "layers.1.ffn.experts",
                          "layers.1.ffn.shared_experts.0"),
}


def train(name: str, registry: Registry, mesh: object, steps: int) -> None:
    """Build model `name` for the mesh, run `steps` optimiser steps, and print what was built."""
    spec = registry.model(name)
    model = materialize(build_model(spec, mesh, registry=registry), "cpu", seed=0)
    estimated = parameters(bind(spec, registry.profile(spec.profile))).total
    count = sum(p.numel() for p in model.parameters())
    print(f"\n== {name}: {count:,} parameters (estimator: {estimated:,})")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, spec.vocab, (4, 33), generator=generator)
    for step in range(steps):
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, spec.vocab), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"   step {step}: loss {loss.item():.4f}")
    for path in EXPLAINED[name]:
        story = explain_module(model, path)
        if story["family"] is None:
            print(f"   {path}: {story['module']} (not a family; families inside: {story['families_inside']})")
            continue
        print(f"   {path}: family {story['family']} -> variant {story['variant']} ({story['clause']}), "
              f"selectors {story['selectors']}, mesh {story['mesh']}")
        print(f"      declared at {story['declared_at']['variant']}")
    print(f"   {len(collect_family_modules(model))} modules built through families")


def full_size(registry: Registry) -> None:
    """Build the full-size example models on the meta device and compare parameter counts."""
    for name in ("qwen3_next_80b_a3b", "deepseek_v3"):
        spec = registry.model(name)
        model = build_model(spec, registry=registry, device="meta")
        count = sum(p.numel() for p in model.parameters())
        estimated = parameters(bind(spec, registry.profile(spec.profile))).total
        print(f"{name} (meta): {count:,} parameters, estimator {estimated:,}, equal: {count == estimated}")


def main() -> None:
    """Parse the arguments, start a one-process gloo job and train both small models."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--full-size", action="store_true", help="also build the full-size models on meta")
    args = parser.parse_args()
    registry = compile_sources([Source("small.hpf", SMALL_SPECS)])
    with tempfile.TemporaryDirectory() as folder:
        store = dist.FileStore(os.path.join(folder, "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        try:
            mesh = init_device_mesh("cpu", (1, 1, 1), mesh_dim_names=("tp", "cp", "ep"))
            for name in ("qwen3_next_small", "deepseek_v3_small"):
                train(name, registry, mesh, args.steps)
        finally:
            dist.destroy_process_group()
    if args.full_size:
        full_size(compile_paths([Path(__file__).resolve().parent]))


if __name__ == "__main__":
    main()
