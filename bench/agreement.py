"""A model spec into measured-against-estimated rows: forward FLOPs and the bytes autograd saves.

The estimator (hpdsl.cost) prices a model from its op counts. Here the same spec
is built by the torch backend, materialised on the CPU and run forward once on
real tensors, and two things are measured per module: FLOPs with torch's
FlopCounterMode (matrix products, convolutions and attention only, 2 per
multiply-add; the CPU's fused attention kernel is added to its table), and the
storages autograd saves for the backward (saved_tensors_hooks, each storage once,
parameters excluded, each counted in the layer that saves it first). Each number
is set beside the estimator's for the same shapes: every parallel degree 1, no
recompute, byte widths of the dtype run, the attention kernel that actually ran
(flash or not). Only the estimator's matrix-product terms are compared with
FlopCounterMode (hpdsl.cost.formulas.flops.MATMUL_TERMS): it does not see softmax, norms,
activations, rotary or the delta rule's triangular inverse.

docs/validation.md tabulates the rows (bench/validate_estimator.py prints them)
and tests/torch/test_estimator_agreement.py holds them to 2% and 10%. It is a
harness, not part of the library: it lives here, and tests/torch/conftest.py
puts bench/ on the path for the test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from hpdsl.bound.bind import CostModel, LayerConfig, bind
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.facts.cost_terms import DeclaredTerm
from hpdsl.cost.formulas.flops import MATMUL_TERMS, forward_flops_by_term
from hpdsl.cost.formulas.memory import layer_activation_bytes
from hpdsl.ir.nodes import LayerGroup, ModelIR, ProfileIR, RunFacts, block_stated, evolve
from hpdsl.model import ops as OP
from hpdsl.model.ops import count as op_count
from hpdsl.model.strategy import Strategy
from hpdsl.registry import Registry
from hpdsl.torch.layers import Seq2SeqLM
from hpdsl.torch.model import build_model, materialize

FUSED_ATTENTION = ("flash_attention", "efficient_attention", "cudnn_attention")
"""Attention kernels that keep row statistics instead of the score tensor (the estimator's flash)."""


@attrs.frozen
class Agreement:
    """One measured quantity of one part of a model beside the estimator's number."""

    model: str
    part: str          # "model" or a layer kind with the measured layer's path
    quantity: str      # "forward FLOPs" | "saved bytes"
    measured: float
    estimated: float
    note: str = ""

    @property
    def relative(self) -> float:
        """Return (measured − estimated) / estimated."""
        return (self.measured - self.estimated) / self.estimated if self.estimated else float("inf")


@attrs.frozen
class Measurement:
    """What one forward pass measured: FLOPs per module path ("" is the whole model) and saved bytes per layer."""

    flops: dict[str, float]
    flops_by_op: dict[str, dict[str, float]]
    saved: dict[str, int]

    def attention_kernels(self, path: str) -> tuple[str, ...]:
        """Return the attention kernels that ran in the module at `path`: "flash", "math" (batched matmuls)."""
        ops = self.flops_by_op.get(path, {})
        fused = any(any(k in op for k in FUSED_ATTENTION) for op in ops)
        return (("flash",) if fused else ()) + (("math",) if any("bmm" in op for op in ops) else ())


def with_ops(profile: ProfileIR, changes: Mapping[str, Mapping[str, int]]) -> ProfileIR:
    """Return `profile` with some op counts of some kinds changed ({kind: {op: count}})."""
    kinds = {name: attrs.evolve(kind, ops={**kind.ops, **changes.get(name, {})})
             for name, kind in profile.kinds.items()}
    return attrs.evolve(profile, kinds=kinds)


T5_PER_ATTENTION = {"encoder": {"attBMM": 2, "softmax": 1, "headCast": 1},
                    "decoder": {"attBMM": 4, "softmax": 2, "headCast": 2}}
"""The t5 score counts in the estimator's units (QKᵀ and A·V per attention, one softmax and one
score copy each), which the shipped t5 profile now carries (upstream: attBMM 1 / 2, softmax 2 / 4)."""


def small_model(model: ModelIR, *, hidden: int = 256, heads: int = 4, head_dim: int = 64,
                ffn_width: int = 512, vocab: int = 512, per_group: int = 2, positions: int = 256,
                window: int | None = None) -> ModelIR:
    """Return `model` with small dimensions and few layers, keeping its structure (kinds, flags, flavours).

    Grouped-query models keep fewer kv heads than query heads; each body group is
    cut to `per_group` layers and only the first group of a kind past the fourth
    is kept; MTP layers are dropped (the forward pass does not run them). A
    learned position table keeps `positions` rows (the longest sequence it can
    run); a sliding window becomes `window` tokens when given. A state-space
    mixer keeps its expansion and form (Mamba-1's time-step rank, Mamba-2's
    heads and groups) at small sizes: Mamba-2's heads still split d_inner evenly.
    A partial rotary (Phi) turns half of each small head. A DSA indexer keeps
    4 heads choosing 4 keys per query. DeepSeek-V4's attention keeps its one key-and-value head at a small
    query latent, two output groups, an indexer of 4 heads choosing 4 entries, and HCA windows of 8 tokens.
    """
    kv = heads if (model.kv_heads or model.heads) == model.heads else heads // 2
    blocks: dict[str, object] = {}
    if block_stated(model, "moe"):
        blocks.update(experts=8, top_k=min(model.top_k, 2), expert_width=128,
                      shared_experts=min(model.shared_experts, 1),
                      shared_width=128 if model.shared_experts else None,
                      latent_width=hidden // 2 if model.latent_width else None)  # Nemotron 3 Super's latent kept
    if block_stated(model, "linear"):
        blocks.update(key_heads=heads // 2, key_head_dim=head_dim, value_heads=heads, value_head_dim=head_dim)
    if block_stated(model, "mla"):
        blocks.update(kv_lora_rank=64, rope_dim=32, nope_dim=head_dim, v_head_dim=head_dim,
                      q_lora_rank=128 if model.q_lora_rank else 0)
        if model.index_n_heads:  # DSA: a small indexer choosing 4 keys, so a short sequence's selection bites
            blocks.update(index_n_heads=4, index_head_dim=head_dim, index_topk=4)
    if block_stated(model, "ssm"):
        blocks.update(_small_ssm(model, hidden))
    if model.query_rank:  # DeepSeek-V4's attention: one key-and-value head, small latent, groups and indexer;
        # HCA windows of 8 tokens so that a short sequence closes some
        kv = 1
        blocks.update(query_rank=128, o_groups=2, o_lora_rank=64, rope_head_dim=16, hca_ratio=8,
                      indexer_heads=4 if model.indexer_heads else None,
                      indexer_head_dim=32 if model.indexer_head_dim else None,
                      indexer_topk=4 if model.indexer_topk else None)
    if model.rotary_fraction is not None and model.rotary_fraction < 1:
        blocks["rotary_fraction"] = 0.5  # partial rotary kept, an even share of the small head dim
    groups = _few_groups(model.groups, per_group)
    dense = sum(g.count for g in groups if g.kind == "dense")
    return evolve(
        model, hidden=hidden, heads=heads, kv_heads=kv, head_dim=head_dim, vocab=vocab,
        ffn_width=ffn_width, **blocks, mtp=0, groups=groups,
        layers=sum(g.count for g in groups), layer_types=None,
        max_positions=positions if model.learned_positions else None,
        sliding_window=model.sliding_window if window is None or model.sliding_window is None else window,
        first_k_dense=dense if model.first_k_dense is not None else None)


def _small_ssm(model: ModelIR, hidden: int) -> dict[str, object]:
    """Return small ssm dims: state 16, chunks of 8 (a short sequence spans several), 8 heads in ≤ 2 groups."""
    dims: dict[str, object] = {"ssm_state": 16 if model.ssm_state else 0, "ssm_chunk": 8}  # 0: a short conv
    if model.ssm_dt_rank is not None:
        dims["ssm_dt_rank"] = hidden // 16  # HF's "auto" rank, ⌈hidden / 16⌉
    if model.ssm_heads is not None:
        dims["ssm_heads"] = 8  # head dim ssm_expand × hidden / 8, or ssm_head_dim
        dims["ssm_groups"] = None if model.ssm_groups is None else min(model.ssm_groups, 2)
    if model.ssm_head_dim is not None:  # d_inner 1.5 × hidden: no multiple of it, as Nemotron 3 Nano's 4,096 of 2,688
        dims["ssm_head_dim"] = 3 * hidden // 16
    return dims


def _few_groups(groups: Sequence[LayerGroup], per_group: int) -> tuple[LayerGroup, ...]:
    kept: list[LayerGroup] = []
    for group in (g for g in groups if not g.mtp):
        if len(kept) < 4 or group.kind not in {k.kind for k in kept}:
            kept.append(attrs.evolve(group, count=min(group.count, per_group)))
    return tuple(kept)


def _cpu_flash_flops(query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None,
                     **kwargs: Any) -> int:
    """FLOPs of the CPU flash kernel: QKᵀ and A·V, grouped heads included (FlopCounterMode has no entry)."""
    batch, heads, s_q, d_qk = query
    s_k, d_v = key[2], value[3]
    return 2 * batch * heads * s_q * s_k * (d_qk + d_v)


def measure_forward(model: nn.Module, inputs: Sequence[Tensor], layers: Sequence[str]) -> Measurement:
    """Run `model` forward once on `inputs`; count FLOPs per module and saved bytes per layer path."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    inside: list[str] = []
    first_saved: dict[int, tuple[str | None, int]] = {}

    def pack(t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            first_saved.setdefault(storage.data_ptr(), (inside[-1] if inside else None, storage.nbytes()))
        return t

    handles = [track_layer(model.get_submodule(path), path, inside) for path in layers]
    mapping = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_flops}
    try:
        with FlopCounterMode(display=False, custom_mapping=mapping) as counter, \
                torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(*inputs)
    finally:
        for handle in (h for pair in handles for h in pair):
            handle.remove()
    root = type(model).__name__
    by_op = {_strip(name, root): {str(op): float(n) for op, n in ops.items()}
             for name, ops in counter.get_flop_counts().items() if name != "Global"}
    saved = {path: sum(n for where, n in first_saved.values() if where == path) for path in layers}
    return Measurement({path: sum(ops.values()) for path, ops in by_op.items()}, by_op, saved)


def track_layer(module: nn.Module, path: str, inside: list[str]) -> tuple[Any, Any]:
    """Keep `inside` naming the tracked layer whose forward is running."""
    def enter(module: nn.Module, args: Any) -> None:
        inside.append(path)

    def leave(module: nn.Module, args: Any, output: Any) -> None:
        inside.pop()  # a forward hook that returns something replaces the output

    return module.register_forward_pre_hook(enter), module.register_forward_hook(leave)


def _strip(name: str, root: str) -> str:
    return "" if name == root else name.removeprefix(root + ".")


def layer_paths(model: nn.Module, cost_model: CostModel) -> list[tuple[str, str | None]]:
    """Return (module path, kind) of every body layer of a built model, in model order."""
    kinds = [g.kind for g in cost_model.groups if not g.mtp for _ in range(g.count)]
    if isinstance(model, Seq2SeqLM):
        encoder: list[str | None] = [k for k in kinds if k == "encoder"]
        decoder: list[str | None] = [k for k in kinds if k == "decoder"]
        return ([(f"encoder.layers.{i}", k) for i, k in enumerate(encoder)]
                + [(f"decoder.layers.{i}", k) for i, k in enumerate(decoder)])
    return [(f"layers.{i}", k) for i, k in enumerate(kinds)]


def agreement(model: ModelIR, registry: Registry, *, batch: int = 2, seq_len: int = 128,
              dtype: torch.dtype = torch.float32, seed: int = 0, profile: ProfileIR | None = None,
              selectors: Mapping[str, Mapping[str, Any]] | None = None, label: str | None = None
              ) -> tuple[Agreement, ...]:
    """Build `model`, run it forward once, and compare FLOPs and saved bytes with the estimator.

    `profile` prices the model instead of the registry's (same kinds, other op
    counts); `selectors` reach build_model (e.g. an attention backend); `label`
    names the rows (default: the model's name).
    """
    profile = profile or registry.profile(model.profile)
    cost = bind(model, profile)
    built = materialize(build_model(model, registry=registry, selectors=selectors), "cpu", seed=seed)
    built = built.to(dtype)
    paths = layer_paths(built, cost)
    generator = torch.Generator().manual_seed(seed)
    ids = [torch.randint(0, model.vocab, (batch, seq_len), generator=generator)
           for _ in range(2 if isinstance(built, Seq2SeqLM) else 1)]
    measured = measure_forward(built, ids, [p for p, _ in paths])
    estimated = forward_flops_by_term(cost, batch=batch, seq_len=seq_len)
    width = torch.finfo(dtype).bits // 8
    # Every width the dtype's; no dropout masks: the reference modules apply no dropout.
    run = evolve(profile.run, norm_bytes=width, dropout_bytes=0)
    strategy = Strategy(micro_batch=batch, seq_len=seq_len, compute_bytes=width, softmax_bytes=width,
                        param_bytes=width)
    name = label or model.name
    rows = [_model_flops(name, measured, estimated, paths)]
    columns = model_columns(cost)
    for path, kind in _last_of_each_kind(paths):
        # The column's `saved` terms: what its mixer's family declares it keeps (docs/language.md).
        rows += _layer_rows(name, path, kind, cost.kind_config(kind), measured, estimated[kind or "layer"],
                            run, strategy, columns.layer_column(kind).saved)
    return tuple(rows)


def _layer_rows(name: str, path: str, kind: str | None, cfg: LayerConfig, measured: Measurement,
                terms: dict[str, float], run: RunFacts, strategy: Strategy,
                saved: tuple[DeclaredTerm, ...]) -> list[Agreement]:
    """Return one layer's FLOPs and saved-bytes rows (flash priced iff only a fused kernel ran)."""
    part = f"{kind or 'layer'} ({path})"
    kernels = measured.attention_kernels(path) if op_count(cfg.ops, OP.ATT_BMM) > 0 else ()
    strategy = strategy.with_(flash_attention=kernels == ("flash",))
    none, _, _ = layer_activation_bytes(cfg, run, strategy, saved)
    return [Agreement(name, part, "forward FLOPs", measured.flops.get(path, 0.0),
                      sum(terms.get(t, 0.0) for t in MATMUL_TERMS)),
            Agreement(name, part, "saved bytes", measured.saved[path], none, " + ".join(kernels))]


def _model_flops(name: str, measured: Measurement, estimated: dict[str, dict[str, float]],
                 paths: Sequence[tuple[str, str | None]]) -> Agreement:
    """Return the whole model's forward FLOPs: every body layer plus the output projection."""
    def matmul(column: str) -> float:
        return sum(estimated[column].get(t, 0.0) for t in MATMUL_TERMS)

    total = sum(matmul(kind or "layer") for _, kind in paths) + matmul("output")
    return Agreement(name, "model", "forward FLOPs", measured.flops[""], total)


def _last_of_each_kind(paths: Sequence[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """Return the last layer of each kind: what earlier layers already saved (positions, a shared bias) is theirs."""
    last: dict[str | None, str] = {}
    for path, kind in paths:
        last[kind] = path
    return [(path, kind) for kind, path in last.items()]


def validation_suite(registry: Registry, *, dtype: torch.dtype = torch.float32, batch: int = 2,
                     seq_len: int = 128) -> tuple[Agreement, ...]:
    """Return the agreement rows of every model of `registry` at small dimensions (docs/validation.md).

    A t5 model is run a second time with the eager attention backend (its
    self-attention takes a learnt bias, so SDPA runs the math kernel there and
    the flash kernel in the cross-attention, which one flash flag cannot price)
    and priced with T5_PER_ATTENTION.
    """
    rows: list[Agreement] = []
    for name in sorted(registry.models):
        model = small_model(registry.model(name))
        rows += agreement(model, registry, batch=batch, seq_len=seq_len, dtype=dtype)
        if model.profile == "t5":
            rows += agreement(model, registry, batch=batch, seq_len=seq_len, dtype=dtype,
                              profile=with_ops(registry.profile("t5"), T5_PER_ATTENTION),
                              selectors={"attention": {"backend": "eager"}},
                              label=f"{name} (per-attention counts, eager)")
    return tuple(rows)


def format_table(rows: Sequence[Agreement]) -> str:
    """Return the rows as a Markdown table."""
    lines = ["| model | part | quantity | measured | estimated | difference | note |",
             "| --- | --- | --- | ---: | ---: | ---: | --- |"]
    lines += [f"| {r.model} | {r.part} | {r.quantity} | {r.measured:,.0f} | {r.estimated:,.0f} | "
              f"{r.relative:+.2%} | {r.note} |" for r in rows]
    return "\n".join(lines)


__all__ = ["Agreement", "FUSED_ATTENTION", "Measurement", "T5_PER_ATTENTION", "agreement", "format_table",
           "layer_paths", "measure_forward", "small_model", "validation_suite", "with_ops"]
