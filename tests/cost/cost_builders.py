"""Small models and profiles for the estimator tests, built as IR values, the example specs, and device files."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from blocks import linear, mla, moe
from hpdsl.cost import bind
from hpdsl.cost.feasibility.rules import invalid_mask
from hpdsl.cost.sweep.rank import canonical_zero
from hpdsl.cost.sweep.space import full_grid
from hpdsl.bound.bind import CostModel
from hpdsl.ir.nodes import KindIR, LayerGroup, ModelIR, ProfileIR, RunFacts

OPS = ("attMM", "attBMM", "ffMM", "softmax", "dropout", "normOp", "gather", "headCast", "ffAct",
       "linrec")
LLAMA_OPS = dict(attMM=4, attBMM=2, ffMM=3, softmax=1, dropout=0, normOp=2, gather=4, headCast=1,
                 ffAct=1, linrec=0)
GPT_OPS = dict(attMM=4, attBMM=2, ffMM=2, softmax=1, dropout=2, normOp=2, gather=4, headCast=1,
               ffAct=1, linrec=0)
"""A GPT-2/Megatron layer: plain GeLU MLP, two LayerNorms, two hidden dropouts; the score
softmax keeps its output and (with dropout masks kept) the attention dropout's mask, and the
dropped-out probabilities A·V reads are the one score-shaped compute-width tensor (headCast)."""

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def profile(ops: dict[str, int] | None = None, *, run: RunFacts = RunFacts(), name: str = "p",
            ffn: str | None = None) -> ProfileIR:
    """Return a one-kind profile ("decoder")."""
    kind = KindIR("decoder", dict(ops or LLAMA_OPS), "full", ffn)
    return ProfileIR(name, {"decoder": kind}, default="decoder", run=run)


def dense_model(*, hidden: int = 256, layers: int = 4, heads: int = 8, kv_heads: int | None = None,
                ffn_width: int = 1024, vocab: int = 1000, mtp: int = 0, tie: bool = False,
                ops: dict[str, int] | None = None, run: RunFacts = RunFacts()) -> CostModel:
    """Return a bound one-kind dense model."""
    groups = [LayerGroup("decoder", layers)] + ([LayerGroup("decoder", mtp, True)] if mtp else [])
    model = ModelIR("dense", "p", hidden=hidden, layers=layers, heads=heads, vocab=vocab,
                    kv_heads=kv_heads or heads, ffn_width=ffn_width, mtp=mtp, tie_embeddings=tie,
                    groups=tuple(groups))
    return bind(model, profile(ops, run=run))


def moe_model(*, layers: int = 4, first_dense: int = 1, experts: int = 8, top_k: int = 2,
              shared: int = 1, mtp: int = 1) -> CostModel:
    """Return a bound DeepSeek-shaped model: dense layers, then MoE layers, then MTP."""
    kinds = {"dense": KindIR("dense", dict(LLAMA_OPS), "full", "dense"),
             "moe": KindIR("moe", dict(LLAMA_OPS), "full", "moe")}
    groups = [LayerGroup("dense", first_dense), LayerGroup("moe", layers - first_dense)]
    groups += [LayerGroup("moe", mtp, True)] if mtp else []
    model = ModelIR("moe", "ds", hidden=256, layers=layers, heads=8, vocab=1000, kv_heads=8,
                    ffn_width=1024, mtp=mtp, first_k_dense=first_dense,
                    **moe(experts, top_k, 128, shared, 128), groups=tuple(groups))
    return bind(model, ProfileIR("ds", kinds, default="moe"))


def hybrid_model(*, pattern: tuple[str, ...] = ("lin", "lin", "lin", "full") * 2,
                 score_less: bool = False) -> CostModel:
    """Return a bound Qwen3-Next-shaped model of linear ("lin") and full attention layers.

    With score_less, "lin" is a full-attention kind without score ops instead (attBMM,
    softmax and headCast 0, nothing else changed): the stack-difference gold.
    """
    full = KindIR("full", dict(LLAMA_OPS))
    lin_ops = dict(LLAMA_OPS, attBMM=0, softmax=0, headCast=0, linrec=0 if score_less else 1)
    lin = KindIR("lin", lin_ops, "full" if score_less else "linear")
    groups: list[LayerGroup] = []
    for kind in pattern:
        if groups and groups[-1].kind == kind:
            groups[-1] = LayerGroup(kind, groups[-1].count + 1)
        else:
            groups.append(LayerGroup(kind, 1))
    model = ModelIR("hybrid", "h", hidden=256, layers=len(pattern), heads=8, vocab=1000, kv_heads=2,
                    head_dim=64, ffn_width=512, qk_norm=True, output_gate=True,
                    **linear(4, 32, 8, 32, 4), groups=tuple(groups))
    return bind(model, ProfileIR("h", {"full": full, "lin": lin}, default="full"))


def bound(text: str, name: str) -> CostModel:
    """Return model `name` of a spec's text, compiled with the standard library and bound."""
    from hpdsl.api import compile_sources
    from hpdsl.diagnostics import Source

    registry = compile_sources([Source(f"{name}.hpf", text)])
    model = registry.models[name]
    return bind(model, registry.profiles[model.profile])


@cache
def example(name: str) -> CostModel:
    """Return an example spec's model, compiled with the standard library and bound."""
    from hpdsl.api import compile_paths

    registry = compile_paths([EXAMPLES / f"{name}.hpf"])
    model = registry.models[name]
    return bind(model, registry.profiles[model.profile])


H100 = {"memory_bytes": "85899345920", "memory_bandwidth": "3.35e+12", "memory_efficiency": "0.9",
        "peak_bf16": "9.89e+14", "peak_fp32": "6.7e+13", "intra_node_bandwidth": "4.5e+11",
        "inter_node_bandwidth": "5.0e+10"}
"""The H100's facts as devices/h100.hpf states them (device h100_sxm), less its node size and other peaks."""
H100_CURVE = "128 0.02  256 0.08  512 0.25  1024 0.45  2048 0.62  4096 0.7  8192 0.74"


def device_text(name: str, source: str, *, curve: str = H100_CURVE, extra: str = "", **facts: str | None) -> str:
    """Return device `name` as .hpf text: H100's facts but for `facts` (None leaves one out), then `extra` keys."""
    stated = {key: value for key, value in {**H100, **facts}.items() if value is not None}
    lines = [*(f"  {key} = {value}" for key, value in stated.items()), f'  source = "{source}"',
             *([f"  {extra}"] if extra else []), f"  curve matmul {{ {curve} }}"]
    return f"device {name} {{\n" + "\n".join(lines) + "\n}\n"


def valid_with_codes(space: Any, columns: Any) -> tuple[Any, Any]:
    """Return a search space's valid candidates (ZeRO canonical) and each one's work code, as the search makes them."""
    grid = full_grid(space)
    index = [np.tile(np.repeat(np.arange(size), math.prod(space.sizes[k + 1:])), math.prod(space.sizes[:k]))
             for k, size in enumerate(space.sizes)]
    keep = space.kept(index[1], index[5])
    _, ri, mi, ci, _, ki = (i[keep] for i in index)
    ok = ~invalid_mask(columns, grid, requires=False)
    return canonical_zero(grid.take(ok)), space.work_codes(ri, mi, ci, ki)[ok]
