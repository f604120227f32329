"""The importer's reading of one config: its keys over transformers' defaults, and the checked values.

Config is what a config states over what transformers' config class would use
(the profile's `default` rules, hpdsl/importers/rules.py), read with transformers' precedence for composite configs;
whole(), flag() and count() turn a config's values into checked numbers and
flags, each error naming the config key (HfImportError.field).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from hpdsl import ast
from hpdsl.errors import HpdslError
from hpdsl.importers.hf_hybrid import PatternError, normalise
from hpdsl.importers.rules import Rules
from hpdsl.model.fields import FIELDS, MAX_DIMENSION, Field


COMPOSITE_KEYS: frozenset[str] = frozenset({"tie_word_embeddings"})
"""Keys a composite (text_config) model reads from its top level: transformers ties the head of the
outer model by the outer config's flag, whatever text_config says."""


@attrs.frozen(auto_exc=True)
class HfImportError(HpdslError):
    """A config the importer cannot express; the message names the config field."""

    field: str = ""


def model_types(config: Mapping[str, Any]) -> tuple[str, str]:
    """Return (the language model's model_type, the config's own): text_config's wins for the first."""
    outer = str(config.get("model_type") or "")
    text = config.get("text_config")
    inner = str(text.get("model_type") or "") if isinstance(text, Mapping) else ""
    return inner or outer, outer


def effective(config: Mapping[str, Any], model_type: str, rules: Rules,
              outer_defaults: Mapping[str, Any] | None = None) -> Config:
    """Return the keys the language model is built from, with transformers' precedence.

    `rules` are the import rules of the language model's model_type (its
    defaults for absent keys, hpdsl/importers/rules.py). A composite config
    builds its language model from text_config; the head's tying is the outer
    model's, read from the top level (stated, else `outer_defaults`, the outer
    config class's), whatever text_config says.
    """
    text = config.get("text_config")
    if not isinstance(text, Mapping):
        defaults = dict(rules.defaults)
        try:
            stated = normalise(config, defaults, rules.patterns)  # a Megatron-style hybrid's pattern and keys
        except PatternError as exc:
            raise HfImportError(str(exc), exc.field) from None
        return Config(stated, defaults, model_type, rules)
    stated = dict(text)
    defaults = dict(rules.defaults)
    outer = outer_defaults or {}
    for key in COMPOSITE_KEYS:
        stated.pop(key, None)
        if key in config:
            stated[key] = config[key]
        elif key in outer:
            defaults[key] = outer[key]
        else:
            defaults.pop(key, None)
    return Config(stated, defaults, str(config.get("model_type") or model_type), rules)


@attrs.frozen
class Config:
    """A config's stated keys over transformers' defaults for its model_type (the profile's `default` rules)."""

    stated: Mapping[str, Any]
    defaults: Mapping[str, Any]
    model_type: str
    rules: Rules | None = None
    """The rules whose maps' tables translate a key's values (`map KEY -> FIELD { VALUE -> VALUE }`)."""

    def get(self, key: str, default: Any = None) -> Any:
        """Return the stated value (`a.b`: key b of a's object), else transformers' default, else `default`.

        A value the key's map translates is returned as the field's value it means.
        """
        found = value_at(self.stated, key)
        if not (found is not None or key in self.stated):
            found = self.defaults.get(key, default) if self._defaulted(key) else default
        return found if self.rules is None else self.rules.translated(key, found)

    def _defaulted(self, key: str) -> bool:
        """Whether transformers' default for `key` holds: a key inside an object only where no object is stated."""
        return "." not in key or key.split(".", 1)[0] not in self.stated

    def __contains__(self, key: str) -> bool:
        return key in self.stated or self.defaults.get(key) is not None

    def source(self, keys: Sequence[str]) -> str | None:
        """Return the first of `keys` the config states, else the first transformers' defaults give; None: neither.

        A stated key beats a defaulted one whatever their order: a config whose rope_theta is
        rope_parameters.rope_theta is not priced at its class's default top-level rope_theta.
        """
        stated = next((key for key in keys if value_at(self.stated, key) is not None and not self._off(key)), None)
        return stated or next((key for key in keys if self.defaults.get(key) is not None and self._defaulted(key)
                               and key not in self.stated), None)

    def _off(self, key: str) -> bool:
        """Whether a stated key's value is one its rules ignore (`ignore "..." { KEY = VALUE }`): it sets nothing.

        Such a key, like one stated as null, leaves its field unset rather than at transformers'
        default for an absent key: Mistral-7B-v0.3's `sliding_window: null` is no window, not
        MistralConfig's 4,096, and YaRN's `mscale_all_dim: 0.0` is off, as transformers tests it for truth.
        """
        if self.rules is None or key not in self.rules.ignored_at:
            return False
        value, off = value_at(self.stated, key), self.rules.ignored_at[key]
        return isinstance(value, bool) == isinstance(off, bool) and value == off

    def required(self, key: str) -> Any:
        """Return a key that changes the count: stated or defaulted, else an error naming it."""
        if key in self.stated:
            return self.stated[key]
        if key in self.defaults:
            return self.defaults[key]
        raise HfImportError(f"the config states no {key}, and no profile's import rules give transformers' "
                            f"default for model_type {self.model_type!r}; state it in the config, or "
                            f"add `default {key} = ...` to the profile's hf block (docs/importing.md)", key)


def value_at(config: Mapping[str, Any], key: str) -> Any:
    """Return config[key], or for a dotted key (`rope_scaling.factor`) the value inside its objects; None if absent."""
    if key in config or "." not in key:
        return config.get(key)
    value: Any = config
    for part in key.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def first(cfg: Config, names: Sequence[str]) -> Any:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    return None


def flag_at(cfg: Config, key: str) -> bool | None:
    """Return the flag a config key states (None: unset)."""
    value = cfg.get(key)
    return None if value is None else flag(value, key)


def flag(value: Any, key: str) -> bool:
    """Return a config's flag; true, false, 1 or 0, else an error naming the field it sets."""
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise HfImportError(f"{key} is {shown(value)}; expected true or false", key)


def count(cfg: Config, key: str) -> int | None:
    """Return a pattern's count (a step, an interval, a first layer): None when unset or 0."""
    value = cfg.get(key)
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None
    return whole(value, key)


def period(cfg: Config, key: str) -> int | None:
    """Return a period in layers (Llama 4's interleave_moe_layer_step): None when unset, a stated 0 refused.

    Transformers divides by it (layer i is the period's when (i + 1) % period == 0), so 0 is no model.
    """
    value = cfg.get(key)
    if value is not None and value == 0 and not isinstance(value, bool):
        raise HfImportError(f"{key} is 0; expected a period of at least 1 layer", key)
    return count(cfg, key)


def whole(value: Any, key: str, field: str | None = None, *, row: Field | None = None) -> int:
    """Return `value` as a whole number within FIELDS[field]'s bounds (or `row`'s), else an error naming `key`.

    `field` is the FIELDS row the value becomes (hpdsl/model/fields.py); None: a
    count that is not a field (a pattern's step), bounded like a layer count.
    `row` is an author field's declaration, for a field FIELDS does not hold.
    """
    row = row or FIELDS.get(field or "", FIELDS["layers"])
    low = row.minimum if row.minimum is not None else 0
    high = row.maximum if row.maximum is not None else MAX_DIMENSION
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)
                                        and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise HfImportError(f"{key} is {shown(value)}; expected a whole number", key)
    if not low <= value <= high:
        raise HfImportError(f"{key} is {shown(value)}; expected a whole number from {low} to {high}", key)
    return int(value)


def number(value: Any, key: str, field: str) -> float:
    """Return `value` as a positive finite number for FIELDS[field], else an error naming `key`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise HfImportError(f"{key} is {shown(value)}; expected a positive number ({FIELDS[field].meaning})", key)
    return float(value)


def shown(value: Any) -> str:
    """Return a value for a message, cut short (a config may hold a 5,000-digit number)."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10 ** 30 else "a number past 10^30"
    return text if len(text) <= 60 else text[:57] + "..."


def field_item(key: str, value: Any) -> ast.Field:
    """Return the model statement `key value` (an int, a flag, a number or a string)."""
    kinds: dict[type, ast.LiteralKind] = {bool: "bool", float: "float", str: "string"}
    return ast.Field(ast.Name(key), ast.Literal(value, kinds.get(type(value), "int")))


__all__ = ["Config", "HfImportError", "count", "effective", "field_item", "first", "flag", "flag_at", "model_types",
           "number", "shown", "value_at", "whole"]
