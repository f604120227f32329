"""The import rules that hold for one config: its profile's `hf` blocks and every profile's `hf "*"` blocks.

The knowledge of what a config key means lives in the profiles (profiles/*.hpf,
docs/importing.md): transformers' defaults for absent keys, which keys map to
which model fields, which keys a built-in rule reads, which are irrelevant to
cost, and the characters of a layer-pattern string. Rules gathers them for a
config of one model_type priced by one profile, so the importer's Python is the
same for every model_type. BUILTIN_READS are the keys the importer's built-in
rules read (its computational rules: layer patterns, activations, norms,
biases; hpdsl/importers/hf_layers.py and hf.py), each only where a profile
declares `read KEY`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from hpdsl.ir.nodes import DimIR, ImportRulesIR, ProfileIR, Scalar, TranslatedValue

EVERY_CONFIG = "*"
"""The model_type of an `hf "*"` block: its rules hold for every config, whatever profile prices it."""

BUILTIN_READS: frozenset[str] = frozenset({
    # layer patterns (hf_layers.py)
    "layer_types", "full_attention_interval", "sliding_window_pattern", "_sliding_window_pattern",
    "use_sliding_window", "max_window_layers", "decoder_sparse_step", "mlp_only_layers", "moe_layer_freq",
    "mlp_layer_types",
    "attn_layer_indices", "attn_layer_period", "attn_layer_offset", "expert_layer_period",
    "expert_layer_offset", "hybrid_layer_pattern", "mlp_layer_types",
    "indexer_types", "index_topk_pattern", "index_topk_freq", "index_skip_topk_offset",
    "num_kv_shared_layers", "compress_ratios", "num_hash_layers",
    "no_rope_layers", "no_rope_layer_interval", "interleave_moe_layer_step", "moe_layers",
    # per-layer head shapes (hf_shapes.py)
    "num_attention_heads_per_layer", "per_layer_config",
    # activations, norms and biases (hf.py)
    "hidden_act", "hidden_activation", "activation_function", "feed_forward_proj", "rms_norm_eps",
    "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "attention_bias", "qkv_bias", "use_bias",
    # T5's decoder half; MLA, MoE and Mamba block details (hf.py, hf_blocks.py)
    "num_decoder_layers", "mamba_d_head",
    # LFM2's short convolution and adjusted feed-forward width (hf_conv.py)
    "full_attn_idxs", "conv_L_cache", "conv_bias", "block_auto_adjust_ff_dim", "block_ffn_dim_multiplier", "block_multiple_of",
    # Mllama's cross-attention layers (hf_layers.py)
    "cross_attention_layers",
    # Nemotron-H's Megatron-style keys (hf_hybrid.py)
    "layers_block_type", "mlp_hidden_act", "attention_head_dim", "mamba_hidden_act",
})
"""Config keys a built-in rule of the importer can read; a profile enables each with `read KEY`."""

STRUCTURE_KEYS = frozenset({"model_type", "text_config"})
"""Keys every config may state: what it is, and where a composite config keeps its language model."""


@attrs.frozen
class Rules:
    """The merged import rules for configs of one model_type priced by one profile."""

    defaults: Mapping[str, Scalar | None]
    aliases: Mapping[str, tuple[str, ...]]
    reads: frozenset[str]
    ignored: Mapping[str, str]
    ignored_at: Mapping[str, Scalar]
    patterns: Mapping[str, Mapping[str, str]]
    derives: Mapping[str, DimIR] = attrs.field(factory=dict)
    unmodelled: Mapping[str, str] = attrs.field(factory=dict)
    translations: Mapping[str, tuple[TranslatedValue, ...]] = attrs.field(factory=dict)

    def translated(self, key: str, value: Any) -> Any:
        """Return what a mapped key's stated `value` means by its map's table (`true -> pre_norm`), else `value`."""
        for entry in self.translations.get(key, ()):
            if isinstance(entry.stated, bool) == isinstance(value, bool) and entry.stated == value:
                return entry.value
        return value

    def known(self, key: str, value: Any) -> bool:
        """Whether a stated key is read, mapped or irrelevant to cost at `value`."""
        if key in self.unmodelled:  # a construct hpdsl does not build: harmless only at null or its value
            return value is None or (key in self.ignored_at and value == self.ignored_at[key])
        if key in STRUCTURE_KEYS or key in self.reads or key in self.patterns or key in self.mapped:
            return True
        if key in self.ignored_at:
            return value is None or value == self.ignored_at[key]
        if key in self.ignored or any(fnmatch.fnmatchcase(key, glob) for glob in self.globs):
            return True
        if self.structured(key) and (value is None or isinstance(value, Mapping)):
            return not self.unknown(key, value)
        return key.endswith("_config") and isinstance(value, Mapping)

    def unknown(self, key: str, value: Any) -> list[str]:
        """Return the keys no rule names within a stated key: itself, or inside its object the unnamed ones.

        A key whose object some rule reads into (`map rope_scaling.factor -> rope_factor`)
        is held key by key: `rope_scaling.beta_fast` unnamed is refused, not the whole object.
        """
        if self.structured(key) and isinstance(value, Mapping) and not self.irrelevant(key, value):
            return [path for sub, inner in value.items() for path in self.unknown(f"{key}.{sub}", inner)]
        return [] if value is None and self.structured(key) or self.known(key, value) else [key]

    def structured(self, key: str) -> bool:
        """Whether some rule names a key inside `key`'s object (`rope_parameters.rope_theta`)."""
        prefix = key + "."
        named = (*self.mapped, *self.ignored, *self.ignored_at, *self.unmodelled)
        return any(name.startswith(prefix) for name in named)

    def irrelevant(self, key: str, value: Any) -> bool:
        """Whether a key is on the ignore lists at `value` (a tower config that is ignored is not priced)."""
        if key in self.ignored_at:
            return value is None or value == self.ignored_at[key]
        return key in self.ignored or any(fnmatch.fnmatchcase(key, glob) for glob in self.globs)

    @property
    def mapped(self) -> frozenset[str]:
        """Every config key some map reads."""
        return frozenset(key for keys in self.aliases.values() for key in keys)

    @property
    def globs(self) -> tuple[str, ...]:
        return tuple(key for key in self.ignored if "*" in key)

    def keys(self, field: str) -> tuple[str, ...]:
        """Return the config keys mapped to `field` ("hidden", "moe.experts"), the first stated one winning."""
        return self.aliases.get(field, ())


def rules_for(profile: ProfileIR, model_type: str, profiles: Mapping[str, ProfileIR]) -> Rules:
    """Return the rules for a config of `model_type` priced by `profile`.

    The profile's blocks for the model_type (a block without model_types holds
    for every model_type the profile lists) come first, then every profile's
    `hf "*"` blocks. A forced profile that does not list the model_type maps and
    reads what its blocks name for any of its model_types, but takes no
    defaults: they are its model_types' config classes', not this config's.
    """
    listed = model_type in profile.model_types
    own = [block for block in profile.imports if EVERY_CONFIG not in block.model_types]
    applies = [b for b in own if not b.model_types or model_type in b.model_types] if listed else own
    shared = [block for name in sorted(profiles) for block in profiles[name].imports
              if EVERY_CONFIG in block.model_types]
    blocks = applies + shared
    defaults: dict[str, Scalar | None] = {}
    for block in (applies if listed else []) + shared:
        for key, value in block.defaults.items():
            defaults.setdefault(key, value)
    return _merged(blocks, defaults, own=len(applies))


def all_rules(profiles: Mapping[str, ProfileIR]) -> Rules:
    """Return what every profile's rules together know (a config whose model_type no profile lists)."""
    return _merged([block for name in sorted(profiles) for block in profiles[name].imports], {})


def _merged(blocks: Iterable[ImportRulesIR], defaults: dict[str, Scalar | None], own: int = 0) -> Rules:
    """Merge `blocks` in order, the first one stating a key winning; the first `own` are the profile's own.

    A key the profile's own blocks ignore is not read by a shared block's map: GPT-NeoX's attention
    builds every head from hidden / heads whatever num_key_value_heads says (profiles/neox.hpf).
    """
    blocks = list(blocks)
    unread = {key for block in blocks[:own] for key in block.ignored}
    aliases: dict[str, list[str]] = {}
    for index, block in enumerate(blocks):
        for key, field in block.maps.items():
            if index >= own and key in unread:
                continue
            keys = aliases.setdefault(field, [])
            if key not in keys:
                keys.append(key)
    ignored: dict[str, str] = {}
    ignored_at: dict[str, Scalar] = {}
    patterns: dict[str, Mapping[str, str]] = {}
    derives: dict[str, DimIR] = {}
    unmodelled: dict[str, str] = {}
    translations: dict[str, tuple[TranslatedValue, ...]] = {}
    for block in blocks:
        for key, table in block.translations.items():
            translations.setdefault(key, table)
        for key, why in block.ignored.items():
            ignored.setdefault(key, why)
        for key, value in block.ignored_at.items():
            ignored_at.setdefault(key, value)
        for key, symbols in block.patterns.items():
            patterns.setdefault(key, symbols)
        for field, expr in block.derives.items():
            derives.setdefault(field, expr)
        for key, construct in block.unmodelled.items():
            unmodelled.setdefault(key, construct)
    # A key some other block maps, reads or ignores is that block's to price: not an unmodelled construct
    # here (Gemma 4's moe_intermediate_size, DeepSeek's experts' width, in what every profile knows together).
    for block in blocks:
        handled = {*block.maps, *block.reads, *block.ignored, *block.ignored_at, *block.patterns}
        for key in handled - set(block.unmodelled):
            unmodelled.pop(key, None)
    return Rules(defaults=defaults, aliases={field: tuple(keys) for field, keys in aliases.items()},
                 reads=frozenset(key for block in blocks for key in block.reads), ignored=ignored,
                 ignored_at=ignored_at, patterns=patterns, derives=derives, unmodelled=unmodelled,
                 translations=translations)


__all__ = ["BUILTIN_READS", "EVERY_CONFIG", "Rules", "all_rules", "rules_for"]
