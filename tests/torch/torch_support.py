"""Helpers the torch-backend tests share: small specs, registries, process groups, shrunk models.

A plain module (no pytest), so the multi-process test's spawned workers can import it.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from pathlib import Path

import attrs
import torch
import torch.distributed as dist

from hpdsl.api import compile_paths, compile_sources
from hpdsl.diagnostics import Source
from hpdsl.ir.nodes import LayerGroup, ModelIR
from hpdsl.registry import Registry

ROOT = Path(__file__).resolve().parents[2]

SMALL_SPECS = """
// Qwen3-Next-shaped: hybrid Gated DeltaNet / gated full attention, MoE with a gated shared expert.
model tiny_qwen3_next : qwen3_5 {
  hidden 64  layers 4  heads 4  kv_heads 2  head_dim 16  vocab 96  ffn_width 96
  tie_embeddings false
  qkv_bias false  o_bias false  mlp_bias false  qk_norm  output_gate
  norm rmsnorm  norm_bias false  mlp gated  activation silu
  moe { experts 8  top_k 2  expert_width 32  shared_experts 1  shared_width 32  shared_gate  router_bias false }
  linear { key_heads 2  key_head_dim 16  value_heads 4  value_head_dim 16  conv 4 }
  stack [linear_attention * 3, full_attention]
  mtp 1
}
// DeepSeek-V3-shaped: MLA, one dense layer then MoE layers with a shared expert.
model tiny_deepseek_v3 : deepseek {
  hidden 64  layers 3  heads 4  kv_heads 4  vocab 96  ffn_width 96
  first_k_dense 1  mtp 1  tie_embeddings false
  qkv_bias false  o_bias false  mlp_bias false  qk_norm false  output_gate false
  norm rmsnorm  norm_bias false  mlp gated  activation silu
  mla { q_lora_rank 32  kv_lora_rank 16  rope_dim 8  nope_dim 16  v_head_dim 16 }
  moe { experts 8  top_k 2  expert_width 32  shared_experts 1  shared_gate false  router_bias false }
}
// DeepSeek-V3.2-shaped: tiny_deepseek_v3 with DSA's lightning indexer, 2 heads choosing 4 keys.
model tiny_deepseek_v32 : deepseek {
  hidden 64  layers 3  heads 4  kv_heads 4  vocab 96  ffn_width 96
  first_k_dense 1  mtp 1  tie_embeddings false
  qkv_bias false  o_bias false  mlp_bias false  qk_norm false  output_gate false
  norm rmsnorm  norm_bias false  mlp gated  activation silu
  mla {
    q_lora_rank 32  kv_lora_rank 16  rope_dim 8  nope_dim 16  v_head_dim 16
    index_n_heads 2  index_head_dim 16  index_topk 4
  }
  moe { experts 8  top_k 2  expert_width 32  shared_experts 1  shared_gate false  router_bias false }
}
// Full attention with QK-norm and MoE in every layer: runs under cp and ep.
model tiny_moe : qwen {
  hidden 64  layers 2  heads 4  kv_heads 2  head_dim 16  vocab 96  ffn_width 96
  tie_embeddings false
  qkv_bias false  o_bias false  mlp_bias false  qk_norm  output_gate false
  norm rmsnorm  norm_bias false  mlp gated  activation silu
  moe { experts 8  top_k 2  expert_width 32  shared_experts 1  shared_width 32  router_bias false }
}
// A dense model with biases everywhere and LayerNorm, tied embeddings.
model tiny_dense : llama2 {
  hidden 64  layers 2  heads 4  kv_heads 4  vocab 96  ffn_width 128
  tie_embeddings
  qkv_bias  o_bias  mlp_bias  qk_norm false  output_gate false
  norm layernorm  norm_bias  mlp gated  activation gelu
}
"""


@functools.lru_cache(maxsize=1)
def small_registry() -> Registry:
    """Return the registry of the small specs above, standard library included."""
    return compile_sources([Source("tiny.hpf", SMALL_SPECS)])


@functools.lru_cache(maxsize=1)
def examples_registry() -> Registry:
    """Return the registry of examples/*.hpf, standard library included."""
    return compile_paths([ROOT / "examples"])


def shrink(model: ModelIR, *, per_group: int = 2, groups: int = 4) -> ModelIR:
    """Return `model` with fewer layers: at most `groups` body groups of at most `per_group` layers.

    Keeps one group of every kind the body uses (the first ones, in order), so
    every kind is still built, and the MTP groups (each cut to one layer).
    """
    body = [g for g in model.groups if not g.mtp]
    kept: list[LayerGroup] = []
    for group in body:
        if len(kept) < groups or group.kind not in {k.kind for k in kept}:
            kept.append(attrs.evolve(group, count=min(group.count, per_group)))
    mtp = [attrs.evolve(g, count=1) for g in model.groups if g.mtp]
    layers = sum(g.count for g in kept)
    dense = sum(g.count for g in kept if g.kind == "dense")
    return attrs.evolve(model, layers=layers, mtp=len(mtp), groups=(*kept, *mtp), layer_types=None,
                        first_k_dense=dense if model.first_k_dense is not None else None)


@contextlib.contextmanager
def process_group(world_size: int = 1, *, rank: int = 0, fake: bool = False,
                  store_dir: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """Run the body inside a default process group: fake (any size, one process) or gloo."""
    if fake:
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    else:
        assert store_dir is not None
        store = dist.FileStore(os.path.join(os.fspath(store_dir), "store"), world_size)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def parameter_count(model: torch.nn.Module, *, mtp: bool = False) -> int:
    """Return the number of parameters of `model` outside (or, with mtp, inside) its MTP layers."""
    return sum(p.numel() for name, p in model.named_parameters() if name.startswith("mtp.") == mtp)
