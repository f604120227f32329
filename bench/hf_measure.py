"""transformers' own models, measured: matmul FLOPs per module and the bytes autograd saves per layer.

A config is built with `AutoModelFor*.from_config` under one attention
implementation ("sdpa" or "eager"), cast to the dtype and run forward once in
training mode with labels (the loss included). Two things are measured:

- FLOPs with torch's FlopCounterMode, with formulas registered for the kernels
  it has no entry for (the CPU flash SDPA and its backward, `_grouped_mm`);
- the storages autograd saves (saved_tensors_hooks), each once (by StorageImpl,
  so fake tensors, which have no address, count too), parameters
  excluded, charged to the body layer whose forward is running, else to the
  output part (from the final norm on) or the embedding part (before).

It is a harness, not part of the library (bench/validate_hf.py uses it and
tests/torch/test_validate_hf.py holds its numbers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch
import transformers
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from agreement import track_layer  # bench/agreement.py, beside this module

EMBEDDING, OUTPUT = "embedding", "output"


@attrs.frozen
class HfMeasurement:
    """One forward pass: FLOPs per module path ("" the whole model) and saved bytes per part."""

    flops: dict[str, float]
    saved: dict[str, int]
    layers: tuple[str, ...]
    ops: dict[str, tuple[str, ...]] = {}

    def kernels(self, path: str) -> tuple[str, ...]:
        """Return the attention kernels that ran in the module at `path`: "flash", "math" (batched matmuls)."""
        ops = self.ops.get(path, ())
        return (("flash",) if any("flash" in op for op in ops) else ()) + \
            (("math",) if any("bmm" in op for op in ops) else ())


def _cpu_flash(query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """FLOPs of the CPU flash kernel: QKᵀ and A·V (query heads; grouped kv heads broadcast)."""
    batch, heads, s_q, d_qk = query
    return 2 * batch * heads * s_q * key[2] * (d_qk + value[3])


def _cpu_flash_backward(grad_out: Any, query: Any, key: Any, value: Any, *args: Any,
                        out_shape: Any = None, **kwargs: Any) -> int:
    """FLOPs of its backward: QKᵀ again, then dV, dP, dQ and dK (2.5 times the forward)."""
    batch, heads, s_q, d_qk = query
    s_k, d_v = key[2], value[3]
    return 2 * batch * heads * s_q * s_k * (2 * d_qk + 2 * d_v + d_qk)


def _grouped_mm(a: Any, b: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """FLOPs of a grouped matmul: every row of `a` through one group's (K, N) matrix."""
    rows, inner = a[-2], a[-1]
    return 2 * rows * inner * b[-1]


def flop_formulas() -> dict[Any, Any]:
    """Return the formulas FlopCounterMode lacks, for the kernels these models run on CPU."""
    aten = torch.ops.aten
    table: dict[Any, Any] = {aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash,
                             aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward}
    if hasattr(aten, "_grouped_mm"):
        table[aten._grouped_mm] = _grouped_mm
    return table


def build(config: Mapping[str, Any], impl: str, dtype: torch.dtype, seq2seq: bool, *,
          fake: bool = False) -> nn.Module:
    """Return transformers' model of `config` with attention implementation `impl`, in training mode.

    `fake` (call it under FakeTensorMode) builds the weights in `dtype` directly: a fake
    parameter cannot be swapped for a cast copy by `Module.to`.
    """
    hf_config = transformers.AutoConfig.for_model(**config)
    auto = transformers.AutoModelForSeq2SeqLM if seq2seq else transformers.AutoModelForCausalLM
    torch.manual_seed(0)
    if fake:
        return auto.from_config(hf_config, attn_implementation=impl, dtype=dtype).train()
    model = auto.from_config(hf_config, attn_implementation=impl).to(dtype)
    return model.train()


def body_layers(model: nn.Module) -> list[str]:
    """Return the module paths of the body layers, in model order (decoder stacks; T5's encoder then decoder)."""
    return [name for name, _ in model.named_modules() if _is_layer(name)]


def _is_layer(name: str) -> bool:
    parts = name.split(".")
    return len(parts) >= 2 and parts[-1].isdigit() and parts[-2] in ("layers", "block")


def final_norms(model: nn.Module) -> list[str]:
    """Return the module paths after which everything saved is the output layer's."""
    names = dict(model.named_modules())
    return [n for n in ("model.norm", "decoder.final_layer_norm") if n in names]


def storage_key(t: Tensor) -> int:
    """Return the identity of `t`'s storage: its StorageImpl, not its address (a fake tensor has none)."""
    return int(t.untyped_storage()._cdata)


def measure(model: nn.Module, inputs: Mapping[str, Tensor]) -> HfMeasurement:
    """Run `model` forward once on `inputs`; count FLOPs per module and saved bytes per part."""
    params = {storage_key(p) for p in model.parameters()}
    layers = body_layers(model)
    inside: list[str] = []
    phase = [EMBEDDING]
    first: dict[int, tuple[str, int]] = {}

    held: list[Tensor] = []  # alive until the count is done: a freed storage's key could be reused

    def pack(t: Tensor) -> Tensor:
        key = storage_key(t)
        held.append(t)
        if key not in params:
            first.setdefault(key, (inside[-1] if inside else phase[0], t.untyped_storage().nbytes()))
        return t

    handles: list[Any] = [h for path in layers for h in track_layer(model.get_submodule(path), path, inside)]
    handles += [model.get_submodule(path).register_forward_pre_hook(_setter(phase)) for path in final_norms(model)]
    try:
        with FlopCounterMode(display=False, custom_mapping=flop_formulas()) as counter, \
                torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    root = type(model).__name__
    counts = {("" if name == root else name.removeprefix(root + ".")): ops
              for name, ops in counter.get_flop_counts().items() if name != "Global"}
    flops = {path: float(sum(ops.values())) for path, ops in counts.items()}
    names = {path: tuple(str(op) for op in ops) for path, ops in counts.items()}
    saved: dict[str, int] = {}
    for where, nbytes in first.values():
        saved[where] = saved.get(where, 0) + nbytes
    return HfMeasurement(flops, saved, tuple(layers), names)


def _setter(phase: list[str]) -> Any:
    def hook(module: nn.Module, args: Any) -> None:
        phase[0] = OUTPUT
    return hook


def inputs_for(model: nn.Module, vocab: int, batch: int, seq_len: int, seq2seq: bool) -> dict[str, Tensor]:
    """Return token ids and labels (decoder ids for a seq2seq model)."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (batch, seq_len), generator=generator)
    if seq2seq:
        target = torch.randint(0, vocab, (batch, seq_len), generator=generator)
        return {"input_ids": ids, "decoder_input_ids": target, "labels": target}
    return {"input_ids": ids, "labels": ids}
