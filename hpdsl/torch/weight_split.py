"""A fused transformers tensor cut into the built model's parts under a `split` weight rule (docs/torch.md).

`weight "h.{i}.attn.c_attn." -> split("q.", "k.", "v.") by (SIZES) [interleaved N]`
(grammar/hpdsl.lark, hf_split) cuts a tensor's rows, its output features (dim -2
of a weight, after `transposed`; a bias whole), into the parts in order. The
sizes are dims over the config of the module the first part lies in (its
layer's attention: the head shapes of that layer), else the model's base
config. With `interleaved N` the rows are N groups of the sizes side by side:
GPT-NeoX's query_key_value is [q_h, k_h, v_h] for each head h (N = heads,
sizes head_dim each); Falcon's new_decoder_architecture groups per kv head. Parts naming one
target are joined in order (hpdsl/torch/weights.py `_placed`): a regrouping of rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from torch import Tensor, nn

from hpdsl.bound.config import DIM_NAMES, LayerConfig
from hpdsl.ir.layouts import evaluate_dim, whole
from hpdsl.ir.nodes import DimIR


class SplitRule(Protocol):
    """What splitting reads of a weight rule (hpdsl/torch/weights.py WeightRule, frozen: read-only)."""

    @property
    def source(self) -> str: ...
    @property
    def parts(self) -> tuple[str, ...]: ...
    @property
    def sizes(self) -> tuple[DimIR, ...]: ...
    @property
    def groups(self) -> DimIR | None: ...


def sizes_env(model: nn.Module, target: str, fallback: LayerConfig | None) -> dict[str, int]:
    """Return the counts a split's sizes read: the config of the module nearest `target`, else `fallback`'s."""
    path = target.split(".")[:-1]
    while path:
        config = getattr(model.get_submodule(".".join(path)), "config", None)
        if isinstance(config, LayerConfig):
            return config_counts(config)
        path.pop()
    return {} if fallback is None else config_counts(fallback)


def config_counts(config: Any) -> dict[str, int]:
    """Return a layer config's ints and flags (as 1 or 0) by name, its author fields with them."""
    counts = {name: int(value) for name in DIM_NAMES if isinstance(value := getattr(config, name, None), (int, bool))}
    counts.update({name: int(value) for name, value in (config.extra or {}).items() if isinstance(value, (int, bool))})
    return counts


def split_rows(name: str, value: Tensor, rule: SplitRule, env: Mapping[str, int], problems: list[str],
               shapes: tuple[str, str]) -> tuple[Tensor, ...]:
    """Return `value`'s rows cut into the rule's parts; () with a line in `problems` when the sizes do not fit.

    `shapes`: how the message shows transformers' tensor (as stored, and transposed) and the built parts'.
    """
    sizes = [whole(evaluate_dim(size, env)) for size in rule.sizes]
    groups = 1 if rule.groups is None else whole(evaluate_dim(rule.groups, env))
    texts = ", ".join(size.text or "?" for size in rule.sizes)
    if groups is None or None in sizes or len(sizes) != len(rule.parts):
        problems.append(f"transformers' '{name}': split rule \"{rule.source}\" has sizes ({texts})"
                        + ("" if rule.groups is None else f" interleaved {rule.groups.text}")
                        + " that are not whole counts of the built model's config; state one size per part over its fields")
        return ()
    known = [int(size) for size in sizes if size is not None]
    dim = max(value.dim() - 2, 0)
    if groups * sum(known) != value.shape[dim]:
        problems.append(f"transformers' '{name}' has shape {shapes[0]}, {value.shape[dim]} rows; split rule "
                        f"\"{rule.source}\" cuts {groups * sum(known)} ({texts} = {', '.join(map(str, known))}"
                        + (f", × {groups} interleaved" if rule.groups is not None else "")
                        + f"), the built model's parts {shapes[1]}; state sizes that sum to the rows")
        return ()
    grouped = value.unflatten(dim, (groups, sum(known)))
    return tuple(part.flatten(dim, dim + 1).contiguous() for part in grouped.split(known, dim=dim + 1))


__all__ = ["config_counts", "sizes_env", "split_rows"]
