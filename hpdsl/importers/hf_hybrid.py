"""Megatron-style hybrid configs (Nemotron-H): the layer pattern string and the keys read NemotronHConfig's way.

transformers' NemotronHConfig turns `hybrid_override_pattern` ("M-M*-...": M a
Mamba-2 layer, * attention, - an MLP, E a MoE) into `layers_block_type`, one
kind name per layer, and takes the layer count from it, not from
num_hidden_layers. Its Mamba-2 mixer is mamba_num_heads × mamba_head_dim wide
(`expand` is not read; the profile maps the head dim to ssm_head_dim, which
families/mamba2.hpf reads), its in and out projections take their bias from
`use_bias` (`mamba_proj_bias` is not read), its attention has no bias whatever
`attention_bias` says, and its MLP's activation is `mlp_hidden_act`. normalise()
rewrites such a config into the keys the importer reads for every model type,
so the layer list is lowered to run-length groups like any `layer_types`. The
pattern's characters are the profile's `pattern` rule (profiles/nemotron_h.hpf), as
are a `layers_block_type` list's names (the legacy `mamba` and `attention` that
transformers remaps); the rewrite applies to the configs of a profile that declares one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

class PatternError(ValueError):
    """A hybrid config normalise() cannot express; `field` names the config key."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def normalise(stated: Mapping[str, Any], defaults: Mapping[str, Any],
              patterns: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """Return a hybrid config's keys as the importer reads them (unchanged unless the profile has a pattern).

    `patterns` are the profile's `pattern` rules (profiles/nemotron_h.hpf): key →
    character → layer kind; a profile declaring one prices Megatron-style hybrids.
    """
    if not patterns:
        return dict(stated)
    out = dict(stated)

    def get(key: str) -> Any:
        return out[key] if key in out else defaults.get(key)

    out["layer_types"] = layer_types(out, patterns)
    out["num_hidden_layers"] = len(out["layer_types"])  # NemotronHConfig.num_hidden_layers is the list's length
    # NemotronHMamba2Mixer: in/out_proj bias=config.use_bias (False when absent); not a `default` rule,
    # where the importer's StarCoder2 rule would read it as every projection's bias.
    out["mamba_proj_bias"] = bool(out.pop("use_bias", False))
    out.pop("attention_bias", None)  # NemotronHAttention's projections are bias=False whatever it says
    out["hidden_act"] = get("mlp_hidden_act")  # NemotronHMLP reads mlp_hidden_act; hidden_act is unread
    out.pop("mlp_hidden_act", None)
    _same(get("attention_head_dim"), get("head_dim"), "attention_head_dim")
    out.pop("attention_head_dim", None)
    if get("mamba_hidden_act") not in (None, "silu"):
        raise PatternError(f"mamba_hidden_act is {get('mamba_hidden_act')!r}; hpdsl's Mamba-2 mixer gates "
                           "with silu", "mamba_hidden_act")
    out.pop("mamba_hidden_act", None)
    return out


def layer_types(config: Mapping[str, Any], patterns: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Return the per-layer kind names: `layers_block_type` (or `layer_types`), else a pattern string's.

    A list whose key has a pattern rule names each layer by one of its entries (Nemotron 3 Ultra's
    legacy `mamba` and `attention`, which transformers remaps; profiles/nemotron_h.hpf).
    """
    for key in ("layers_block_type", "layer_types"):
        listed = config.get(key)
        if isinstance(listed, list) and listed:
            names = [str(kind) for kind in listed]
            table = patterns.get(key)
            if not table:
                return names
            unknown = sorted(set(names) - set(table))
            if unknown:
                raise PatternError(f"{key} holds {unknown}; its layer types are "
                                   f"{', '.join(f'{n!r} ({k})' for n, k in table.items())}", key)
            return [table[name] for name in names]
    source = next((k for k in patterns if isinstance(config.get(k), str) and config.get(k)), None)
    if source is None:
        named = " or ".join([*patterns, "layers_block_type"])
        raise PatternError(f"the config states no {named}; a hybrid model's layers come from one of them",
                           next(iter(patterns)))
    pattern, symbols = str(config[source]), patterns[source]
    unknown = sorted(set(pattern) - set(symbols))
    if unknown:
        raise PatternError(f"{source} holds {unknown}; its characters are "
                           f"{', '.join(f'{c!r} ({k})' for c, k in symbols.items())}", source)
    return [symbols[char] for char in pattern]


def _same(megatron: Any, head_dim: Any, key: str) -> None:
    """Refuse Megatron's attention_head_dim where it disagrees with the head_dim transformers builds."""
    if megatron is not None and megatron != head_dim:
        raise PatternError(f"{key} is {megatron!r} but head_dim is {head_dim!r}; transformers builds the "
                           "attention with head_dim, state head_dim to match", key)


__all__ = ["PatternError", "layer_types", "normalise"]
