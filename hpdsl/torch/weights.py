"""Transformers' state dict into a built model, under the profile's `weight` rules (docs/torch.md#loading-transformers-weights).

A profile's `hf` blocks state how transformers' state-dict names map to the
built model's (`weight "model.layers.{i}.self_attn." -> "layers.{i}.mixer."`,
grammar/hpdsl.lark): a name ending in "." is a prefix, the rest of the name
carried over; `{i}` (any `{name}`) stands for a run of digits, a layer or expert
index; `transposed` swaps a tensor's last two dims (transformers' packed experts
are [E, out, in], the built model's [E, in, out]; a 1-D bias stays as it is);
`split(...) by (...)` cuts a fused tensor into parts (hpdsl/torch/weight_split.py), `join(...)` joins
several by rows into one (Qwen3.5's in_proj_qkv and in_proj_z, one in_proj_qkvz). Every name matches the
longest rule of the profile's own blocks, else the longest of the `hf "*"`
blocks (profiles/default.hpf: transformers' Llama names), a rule whose target
the model holds first. Every name left over on either side is an error, all
reported at once.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Container, Mapping, Sequence

import attrs
import torch
from torch import Tensor, nn

from hpdsl.errors import BuildError
from hpdsl.importers.rules import EVERY_CONFIG
from hpdsl.bound.bind import base_config
from hpdsl.ir.nodes import DimIR, ModelIR, ProfileIR, WeightRuleIR
from hpdsl.torch.weight_split import sizes_env, split_rows


@attrs.frozen
class WeightRule:
    """One `weight` rule: transformers' name (or prefix) → the built model's, transposed or not."""

    source: str
    target: str
    transposed: bool = False
    parts: tuple[str, ...] = ()
    sizes: tuple[DimIR, ...] = ()
    groups: DimIR | None = None
    sources: tuple[str, ...] = ()  # a join's parts, in row order; () for a rule of one source

    def part(self, name: str) -> tuple[int, re.Match[str]] | None:
        """Return (index, match) of the join part (or the one source) transformers' `name` matches, else None."""
        for index, source in enumerate(self.sources or (self.source,)):
            if (found := _pattern(source).match(name)) is not None:
                return index, found
        return None

    def apply(self, name: str) -> str | None:
        """Return the built model's name for transformers' `name` (a split's first part), or None when it does not match."""
        names = self.targets(name)
        return names[0] if names else None

    def targets(self, name: str) -> tuple[str, ...]:
        """Return the built model's names for transformers' `name`: every part of a split; () when it does not match."""
        part = self.part(name)
        if part is None:
            return ()
        groups = part[1].groupdict()
        return tuple(re.sub(r"\{(\w+)\}", lambda m: groups[m.group(1)], target) + groups.get("_rest", "")
                     for target in self.parts or (self.target,))


def weight_rules(profile: ProfileIR, model_type: str,
                 profiles: Mapping[str, ProfileIR]) -> tuple[tuple[WeightRule, ...], tuple[WeightRule, ...]]:
    """Return (the profile's own rules for `model_type`, every profile's `hf "*"` rules), as stated."""
    own = tuple(_rule(rule) for block in profile.imports if EVERY_CONFIG not in block.model_types
                and (not block.model_types or model_type in block.model_types) for rule in block.weights)
    shared = tuple(_rule(rule) for name in sorted(profiles) for block in profiles[name].imports
                   if EVERY_CONFIG in block.model_types for rule in block.weights)
    return own, shared


def _rule(rule: WeightRuleIR) -> WeightRule:
    return WeightRule(rule.source, rule.target, rule.transposed, rule.parts, rule.sizes, rule.groups, rule.sources)


def _matched_length(rule: WeightRule, name: str) -> int:
    """Return the length of the source `name` matches: a join's matched part, not its first."""
    part = rule.part(name)
    return 0 if part is None else len((rule.sources or (rule.source,))[part[0]])


@functools.lru_cache(maxsize=1024)
def _pattern(source: str) -> re.Pattern[str]:
    """Return the regex of one source: placeholders as digit runs, a prefix open at the end."""
    body = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>\\d+)", re.escape(source))
    return re.compile(body + ("(?P<_rest>.*)" if source.endswith(".") else "") + "$")


def map_name(name: str, tiers: Sequence[Sequence[WeightRule]],
             held: Container[str] = ()) -> tuple[str, WeightRule] | None:
    """Return (built name, rule) for transformers' `name`: the longest matching rule of the first tier with one.

    Rules whose target the model holds (`held`) are tried first, over every tier: one source
    may have a rule per layer kind (Mllama's input_layernorm is a cross-attention layer's
    cross_norm, its own rule, and a self-attention layer's mixer_norm, Llama's).
    """
    for only_held in (True, False):
        for tier in tiers:
            matches = [(rule, target) for rule in tier if (target := rule.apply(name)) is not None
                       and (target in held or not only_held)]
            if matches:
                rule, target = max(matches, key=lambda match: _matched_length(match[0], name))
                return target, rule
    return None


def load_hf_state_dict(model: nn.Module, state: Mapping[str, Tensor], profile: ProfileIR, model_type: str,
                       profiles: Mapping[str, ProfileIR], *, model_ir: ModelIR | None = None) -> None:
    """Copy transformers' `state` into `model` under the profile's weight rules; every mismatch is one BuildError.

    A split rule's sizes read the config of the module its first part lies in (a layer's attention), else
    `model_ir`'s base config (hpdsl/bound/bind.py), the model the module was built from.
    """
    config = None if model_ir is None else base_config(model_ir, profile)
    ours = model.state_dict(keep_vars=True)
    tiers = weight_rules(profile, model_type, profiles)
    problems: list[str] = []
    filled: dict[str, str] = {}
    pairs: list[tuple[Tensor, Tensor]] = []
    seen: set[tuple[int, tuple[int, ...]]] = set()
    joined: dict[str, tuple[WeightRule, dict[int, tuple[str, Tensor]]]] = {}
    for name, value in state.items():
        if (key := (value.data_ptr(), tuple(value.shape))) in seen and value.numel():
            continue  # a tied tensor (lm_head is the embedding): loaded once under its first name
        seen.add(key)
        mapped = map_name(name, tiers, ours)
        if mapped is None:
            problems.append(f"transformers' '{name}' matches no weight rule of profile '{profile.name}' "
                            f"(model_type {model_type}); add `weight \"{name}\" -> \"...\"` to its hf block")
            continue
        _, rule = mapped
        targets = rule.targets(name)
        missing = [target for target in targets if target not in ours]
        for target in missing:
            close = difflib.get_close_matches(target, list(ours), n=1)
            problems.append(f"transformers' '{name}' maps to '{target}' (rule \"{rule.source}\" -> "
                            f"\"{rule.target}\"), which the built model does not hold"
                            + (f"; did you mean '{close[0]}'?" if close else ""))
        if rule.sources and not missing:
            index = (rule.part(name) or (0, None))[0]
            joined.setdefault(targets[0], (rule, {}))[1][index] = (name, value)
            continue  # joined with the other parts once all are read
        clashes = [target for target in targets if target in filled]
        problems += [f"transformers' '{name}' and '{filled[target]}' both map to '{target}'" for target in clashes]
        if missing or clashes:
            continue
        filled.update(dict.fromkeys(targets, name))
        env = sizes_env(model, targets[0], config) if rule.parts else {}
        pairs += _placed(name, value, rule, [(target, ours[target]) for target in targets], env, problems)
    for target, (rule, read) in joined.items():
        pairs += _joined(target, rule, read, ours, filled, problems)
    problems += [f"the built model's '{name}' gets no tensor from transformers' state dict"
                 for name in ours if name not in filled and not _tied_alias(ours, name, filled)]
    if problems:
        raise BuildError(f"{len(problems)} weight name problem{'s' * (len(problems) != 1)} loading transformers' "
                         "state dict:\n  " + "\n  ".join(problems)
                         + "\n(the weight rules: `weight` in the profile's hf blocks, docs/language.md)")
    with torch.no_grad():
        for tensor, value in pairs:
            tensor.copy_(value)


def _placed(name: str, value: Tensor, rule: WeightRule, targets: Sequence[tuple[str, Tensor]],
            env: Mapping[str, int], problems: list[str]) -> list[tuple[Tensor, Tensor]]:
    """Return (built tensor, transformers' tensor or its split part) pairs; each shape that differs is a problem."""
    source = value.transpose(-2, -1) if rule.transposed and value.dim() >= 2 else value
    shape = f"{tuple(value.shape)}" + (f" (transposed {tuple(source.shape)})" if source is not value else "")
    parts = ", ".join(str(tuple(tensor.shape)) for _, tensor in dict(targets).items())
    pieces = split_rows(name, source, rule, env, problems, (shape, parts)) if rule.parts else (source,)
    # Parts naming one target are joined in order: Qwen3-Next's in_proj_qkvz, q, k, v and z per key head in
    # transformers, all of q, then k, v and z in the built projection (a split interleaved by key heads).
    rows = max(source.dim() - 2, 0)
    gathered: dict[str, list[Tensor]] = {}
    for (target, _), piece in zip(targets, pieces):
        gathered.setdefault(target, []).append(piece)
    joined = {target: pieces_[0] if len(pieces_) == 1 else torch.cat(pieces_, dim=rows)
              for target, pieces_ in gathered.items()}
    placed = []
    for (target, tensor), piece in ((t, joined[t[0]]) for t in dict(targets).items() if t[0] in joined):
        if tuple(piece.shape) != tuple(tensor.shape):
            problems.append(f"transformers' '{name}' has shape {shape}"
                            f"{', its part ' + str(tuple(piece.shape)) if rule.parts else ''}, "
                            f"the built model's '{target}' {tuple(tensor.shape)}")
            continue
        placed.append((tensor, piece))
    return placed


def _joined(target: str, rule: WeightRule, read: Mapping[int, tuple[str, Tensor]], ours: Mapping[str, Tensor],
            filled: dict[str, str], problems: list[str]) -> list[tuple[Tensor, Tensor]]:
    """Return the (built tensor, transformers' parts joined by rows) pair of one join target; a problem otherwise."""
    names = [read[i][0] for i in sorted(read)]
    if target in filled:
        problems.append(f"transformers' '{names[0]}' and '{filled[target]}' both map to '{target}'")
        return []
    filled[target] = names[0]  # a problem below names the target: not also "gets no tensor"
    if len(read) < len(rule.sources):
        lacking = [source for i, source in enumerate(rule.sources) if i not in read]
        problems.append(f"the built model's '{target}' joins {len(rule.sources)} tensors (rule join(...) -> "
                        f"\"{rule.target}\"), but transformers' state dict holds no {', '.join(lacking)} beside "
                        f"{', '.join(names)}")
        return []
    parts = [read[i][1].transpose(-2, -1) if rule.transposed and read[i][1].dim() >= 2 else read[i][1]
             for i in range(len(rule.sources))]
    # Rows are dim −2 of a weight (output features), dim 0 of a bias; every other dim must agree.
    rest = {(part.dim(), tuple(part.shape[:-2]) + tuple(part.shape[-1:]) if part.dim() >= 2 else ()) for part in parts}
    if len(rest) != 1:
        problems.append(f"transformers' {', '.join(names)} have shapes "
                        f"{', '.join(str(tuple(p.shape)) for p in parts)}: they join by rows only where "
                        f"the rest of their shapes agree ('{target}')")
        return []
    whole = torch.cat(parts, dim=-2 if parts[0].dim() >= 2 else 0)
    if tuple(whole.shape) != tuple(ours[target].shape):
        problems.append(f"transformers' {', '.join(names)} joined have shape {tuple(whole.shape)}, "
                        f"the built model's '{target}' {tuple(ours[target].shape)}")
        return []
    return [(ours[target], whole)]


def _tied_alias(ours: Mapping[str, Tensor], name: str, filled: Mapping[str, str]) -> bool:
    """Whether `name` is the same tensor as one already filled (a tied head is the embedding)."""
    return any(ours[other] is ours[name] for other in filled)


__all__ = ["WeightRule", "load_hf_state_dict", "map_name", "weight_rules"]
