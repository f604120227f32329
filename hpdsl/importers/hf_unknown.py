"""Every stated config key against the import rules: mapped, read, ignored, or named in an error.

A key no rule of the pricing profile (and no `hf "*"` rule) names is refused,
naming every such key (`allow_unknown` turns the refusal into a loud warning).
A profile forced with `--profile` onto a model_type it does not list is held to
the same rules, so a config whose architecture it cannot express is refused,
not priced silently. docs/importing.md, "Forcing a profile".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from hpdsl.importers.hf_config import HfImportError, value_at
from hpdsl.importers.rules import STRUCTURE_KEYS, Rules, all_rules, rules_for
from hpdsl.ir.nodes import ProfileIR


def check_keys(config: Mapping[str, Any], rules: Rules | None, profile: ProfileIR | None, model_type: str, *,
               forced: bool, allow_unknown: bool, profiles: Mapping[str, ProfileIR] | None = None,
               wrapper: Rules | None = None) -> list[str]:
    """Return the warning for unknown keys under allow_unknown; else raise naming every one of them.

    `rules` None: no profile prices the model_type, so the keys are held to what
    every profile's rules know together (`profiles`). `wrapper`: the rules of a
    composite config's own model_type (wrapper_rules), which its top-level keys may also meet.
    """
    merged = rules if rules is not None else all_rules(profiles or {})
    unknown = unknown_keys(config, merged, wrapper)
    if not unknown:
        return []
    constructs = unmodelled_constructs(config, unknown, merged, profile)
    if constructs and not allow_unknown:
        raise HfImportError(constructs, unknown[0])
    why = "which hpdsl does not understand"
    if profile is not None and (forced or model_type not in profile.model_types):
        listed = " ".join(profile.model_types) or "none"
        why = (f"which profile '{profile.name}' (forced with --profile; its model_types: {listed}) does not "
               "map: its import rules name no such key")
    return refuse(unknown, allow_unknown, why)


def unmodelled_constructs(config: Mapping[str, Any], unknown: list[str], rules: Rules,
                          profile: ProfileIR | None) -> str:
    """Return the refusal naming each construct the stated keys mean that hpdsl does not build ('' if none).

    The constructs are the import rules' data (`unmodelled "construct" { key = value }`
    in a profile, docs/importing.md); each is named with the keys that state it.
    """
    text = config.get("text_config")
    stated: dict[str, list[str]] = {}
    for key in unknown:
        bare = key.removeprefix("text_config.")
        if bare not in rules.unmodelled:
            continue
        value = value_at(text, bare) if key != bare and isinstance(text, Mapping) else value_at(config, bare)
        shown = json.dumps(value)
        stated.setdefault(rules.unmodelled[bare], []).append(f"{key} = {shown if len(shown) <= 40 else shown[:36] + ' ...'}")
    if not stated:
        return ""
    named = "; ".join(f"{', '.join(keys)}: {construct}" for construct, keys in stated.items())
    rest = [key for key in unknown if key.removeprefix("text_config.") not in rules.unmodelled]
    also = f"; it also states {', '.join(rest)}, which hpdsl does not understand" if rest else ""
    owner = f" (profile '{profile.name}' declares what these keys mean)" if profile is not None else ""
    return (f"the config states {named} — hpdsl does not model {'this construct' if len(stated) == 1 else 'these constructs'}"
            f"{owner}{also}; the model cannot be priced. Hint: a profile that builds the construct (families "
            "and wiring in .hpf, docs/importing.md) would import it; --allow-unknown prices the model without it, "
            "which is wrong")


def unknown_keys(config: Mapping[str, Any], rules: Rules, wrapper: Rules | None = None) -> list[str]:
    """Return every stated key no rule names (a composite's as `text_config.KEY`).

    A composite config's top-level keys are the wrapper's: known to the language
    model's rules or to the wrapper's own (`wrapper`, its vision tower's keys).
    """
    text = config.get("text_config")
    outer = wrapper if wrapper is not None and isinstance(text, Mapping) else None
    unknown = [path for key, value in config.items() if not (outer is not None and outer.known(key, value))
               for path in rules.unknown(key, value)]
    if isinstance(text, Mapping):
        unknown += [f"text_config.{path}" for key, value in text.items() for path in rules.unknown(key, value)]
    return unknown


def check_finite(config: Mapping[str, Any], rules: Rules, wrapper: Rules | None = None) -> None:
    """Raise naming a key whose value holds JSON's non-standard Infinity or NaN, unless the rules ignore it.

    Published files state them where a number is a bound, not a size (Nemotron-H's
    time_step_limit [0.0, Infinity]); a key hpdsl ignores may, a key it reads may not.
    """
    text = config.get("text_config")
    outer = wrapper if wrapper is not None and isinstance(text, Mapping) else None
    stated = [(key, key, value, outer) for key, value in config.items() if key != "text_config"]
    if isinstance(text, Mapping):
        stated += [(f"text_config.{key}", key, value, None) for key, value in text.items()]
    for shown, key, value, other in stated:
        if _non_finite(value) and not rules.irrelevant(key, value) \
                and not (other is not None and other.irrelevant(key, value)):
            raise HfImportError(f"{shown} states {json.dumps(value)[:80]}, which holds a number a config cannot "
                                "state (JSON's Infinity or NaN); only a key hpdsl ignores may", key)


def _non_finite(value: Any) -> bool:
    """Whether a JSON value holds Infinity, -Infinity or NaN anywhere."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_non_finite(v) for v in value.values())
    return isinstance(value, list) and any(_non_finite(v) for v in value)


def wrapper_profile(config: Mapping[str, Any], profiles: Mapping[str, ProfileIR]) -> ProfileIR | None:
    """Return the profile listing a composite config's own model_type (the wrapper), if one does.

    Which wrappers carry a language model in text_config, and which of their
    keys are the vision tower's, is data: the profile that lists the wrapper's
    model_type (gemma3 beside gemma3_text) and its `hf "WRAPPER"` block
    (docs/importing.md, "Composite configs").
    """
    outer = str(config.get("model_type") or "")
    text = config.get("text_config")
    if not outer or not isinstance(text, Mapping) or outer == str(text.get("model_type") or ""):
        return None
    return next((p for _, p in sorted(profiles.items()) if outer in p.model_types), None)


def wrapper_rules(config: Mapping[str, Any], profiles: Mapping[str, ProfileIR]) -> Rules | None:
    """Return the import rules of a composite config's wrapper (its own and the `hf "*"` ones), if declared."""
    owner = wrapper_profile(config, profiles)
    return None if owner is None else rules_for(owner, str(config["model_type"]), profiles)


def without(config: Mapping[str, Any], unknown: list[str]) -> dict[str, Any]:
    """Return the config without the `unknown` keys: what --allow-unknown ignores is not read either.

    An unknown `text_config.KEY` is dropped from text_config, an unknown `a.b` from a's object.
    """
    kept = dict(config)
    for path in unknown:
        _drop(kept, path.split("."))
    return kept


def _drop(config: dict[str, Any], parts: list[str]) -> None:
    """Remove the key at `parts` from `config`, copying each object on the way (the caller's stay intact)."""
    head, *rest = parts
    if not rest or head in config and not isinstance(config.get(head), Mapping):
        config.pop(".".join(parts) if rest else head, None)
        return
    inner = config.get(head)
    if isinstance(inner, Mapping):
        config[head] = dict(inner)
        _drop(config[head], rest)


def refuse(unknown: list[str], allow_unknown: bool, why: str) -> list[str]:
    """Raise naming every one of `unknown`, or with allow_unknown return the loud warning."""
    listed = ", ".join(unknown)
    if not allow_unknown:
        raise HfImportError(f"the config states {listed}, {why}; pricing the model without it could be "
                            "wrong (--allow-unknown imports it anyway)", unknown[0])
    return [f"IGNORED {len(unknown)} config key(s) hpdsl does not understand: {listed} ({why}). The import "
            "may price the model WRONG (--allow-unknown)"]


def composite_note(config: Mapping[str, Any], rules: Rules, model_type: str,
                   profiles: Mapping[str, ProfileIR] | None = None) -> list[str]:
    """Return the note that a composite (vision-language) config is priced as its language model.

    It names the towers left out and the wrapper's own keys its profile's rules
    declare (the vision tower's and projector's, `profiles` given).
    """
    towers = sorted(k for k, v in config.items() if k.endswith("_config") and k != "text_config"
                    and isinstance(v, Mapping) and not rules.irrelevant(k, v))
    outer = str(config.get("model_type") or "composite")
    if not isinstance(config.get("text_config"), Mapping):
        # A flat composite (Qwen2.5-VL's published files): the language model's keys at the top level.
        return [f"{outer} is a composite config: priced as its language model, the top-level keys; "
                f"{', '.join(towers)} is not part of the model (hpdsl prices the language model; a vision "
                "tower is a model of its own with the 'vision' profile)"] if towers else []
    note = (f"{outer} is a composite config: imported text_config only, priced as its language model "
            f"(model_type {model_type})")
    if towers:
        note += (f"; {', '.join(towers)} is not part of the model (hpdsl prices the language model; a vision "
                 "tower is a model of its own with the 'vision' profile)")
    owner = wrapper_profile(config, profiles or {})
    if owner is not None:
        own = rules_for(owner, outer, {})  # the wrapper's own blocks, not the `hf "*"` ones
        keys = sorted(k for k, v in config.items() if k not in STRUCTURE_KEYS and not k.endswith("_config")
                      and own.irrelevant(k, v))
        if keys:
            note += (f"; the {outer} keys {', '.join(keys)} are the wrapper's (its vision tower and projector: "
                     f"profile '{owner.name}' says so), not the language model's")
    return [note]


__all__ = ["check_finite", "check_keys", "composite_note", "refuse", "unknown_keys", "without", "wrapper_profile",
           "wrapper_rules"]
