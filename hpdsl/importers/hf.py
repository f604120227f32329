"""A HuggingFace config.json into a model .hpf that the compiler accepts and fmt leaves unchanged.

The importer never guesses, and knows no model_type itself: what a config key
means is the profiles' import rules (`hf { ... }` blocks, docs/importing.md,
gathered by hpdsl/importers/rules.py). The profile comes from the config's
`model_type` through the `model_types` the profiles declare (never from the
model's name), or from `profile=`; an unknown type is an error listing the
profiles. A key the config leaves out has the value transformers' config class
gives it (the profile's `default` rules, tying included), else the profile's
`facts`. A composite config's language model is read from `text_config`, its
head's tying from the top level, as transformers does; its own keys are held to
the rules of the profile listing the wrapper's model_type (its vision tower's),
and the import says so (a warning, `composite`, a comment atop the .hpf).
Every stated key is mapped, read by a built-in rule the profile enables, on an
ignore list, or an error naming it (`allow_unknown` downgrades that to a loud
warning); a forced `--profile` is held to its own rules the same way.

By concern: rules.py merges the rules, hf_config.py reads a config's keys over
transformers' defaults, hf_hybrid.py rewrites a Megatron-style hybrid's
(Nemotron-H), hf_layers.py lowers layer patterns to the stack, hf_blocks.py
writes the moe/linear/ssm/mla blocks; this module ties them together.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from hpdsl import ast
from hpdsl.errors import SpecError
from hpdsl.files import read_text, reason
from hpdsl.importers.hf_blocks import dims_block, mla_block, moe_block, ssm_block, stated_keys
from hpdsl.importers.hf_config import (Config, HfImportError, effective, field_item, first, flag, flag_at, number,
                                       model_types, whole)
from hpdsl.importers.hf_conv import adjusted_width, short_conv_block
from hpdsl.importers.hf_layers import layer_kinds, stack
from hpdsl.importers.hf_shapes import per_layer_heads, per_layer_shapes
from hpdsl.importers.hf_unknown import (
    check_finite, check_keys, composite_note, unknown_keys, without, wrapper_rules,
)
from hpdsl.importers.rules import Rules, rules_for
from hpdsl.ir.layouts import evaluate_dim
from hpdsl.ir.nodes import ProfileIR
from hpdsl.model.fields import FIELDS, KEYWORD_CHOICES, Field, block_facts

INT_FIELDS = tuple(name for name, field in FIELDS.items()
                   if field.block is None and field.type == "int" and name != "layers")
"""Top-level count fields the config's mapped keys state (`layers` is read on its own)."""

FLOAT_FIELDS = tuple(name for name, field in FIELDS.items() if field.block is None and field.type == "float")
"""Top-level number fields (`rotary_fraction`)."""

FLAG_FIELDS = tuple(name for name, field in FIELDS.items() if field.block is None and field.type == "bool")
"""Top-level flag fields."""

FIELD_ORDER = tuple(name for name, field in FIELDS.items() if field.block is None and field.type != "choice")
"""The order the importer writes top-level fields in: the table's."""

ACTIVATION_KEYS = ("hidden_act", "hidden_activation", "activation_function", "feed_forward_proj")
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh",
               "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "relu": "relu", "relu2": "relu2"}


# The largest config.json read (hpdsl/files.py: regular files only, never blocking): real ones are a few KiB.
MAX_CONFIG_BYTES = 16 << 20


@attrs.frozen
class ImportedModel:
    """The result of an import: the model's AST, its .hpf text and what was assumed."""

    model: ast.Model
    text: str
    profile: str
    warnings: tuple[str, ...] = ()
    composite: str | None = None
    """The note that a composite config was priced as its language model (also a warning and a comment)."""


def import_hf_file(path: str | Path, *, profiles: Mapping[str, ProfileIR], name: str | None = None,
                   profile: str | None = None, allow_unknown: bool = False) -> ImportedModel:
    """Read a config.json and import it (see import_hf_config)."""
    try:
        config = json.loads(read_text(path, limit=MAX_CONFIG_BYTES))  # Infinity: check_finite
    except (OSError, UnicodeDecodeError) as exc:
        raise HfImportError(f"{str(path)[:200]}: cannot read the config: {reason(exc)}") from None
    except json.JSONDecodeError as exc:
        raise HfImportError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise HfImportError(f"{path}: the JSON is nested too deeply to read") from None
    except ValueError as exc:  # an int literal past Python's digit limit
        raise HfImportError(f"{path}: not a usable JSON config: {exc}") from None
    if not isinstance(config, dict):
        raise HfImportError(f"{path}: a config.json holds one JSON object")
    return import_hf_config(config, profiles=profiles, name=name or Path(path).parent.name,
                            profile=profile, allow_unknown=allow_unknown)


def import_hf_config(config: Mapping[str, Any], *, profiles: Mapping[str, ProfileIR],
                     name: str | None = None, profile: str | None = None,
                     allow_unknown: bool = False) -> ImportedModel:
    """Turn a HuggingFace config mapping into a model .hpf (text and AST).

    `profile` names the profile to price the model with (default: the one whose
    model_types list the config's); `allow_unknown` turns unknown config keys
    from errors into warnings.
    """
    from hpdsl.fmt import format_file

    model_type, _ = model_types(config)
    chosen, warnings = _pick_profile(config, model_type, profiles, profile, allow_unknown)
    rules = rules_for(chosen, model_type, profiles)
    wrapper = wrapper_rules(config, profiles)
    warnings += check_keys(config, rules, chosen, model_type, forced=profile is not None,
                           allow_unknown=allow_unknown, wrapper=wrapper)
    config = without(config, unknown_keys(config, rules, wrapper))  # what --allow-unknown ignores is not read
    check_finite(config, rules, wrapper)
    cfg = effective(config, model_type, rules, wrapper.defaults if wrapper is not None else {})
    composite = composite_note(config, rules, model_type, profiles)
    warnings += composite
    facts = {**chosen.facts_for(model_type), **_stated_facts(cfg, rules)}
    in_blocks = {k: facts.pop(k) for k in list(facts) if k in block_facts()}
    choice_facts = {k: str(facts.pop(k)) for k in list(facts) if FIELDS[k].type == "choice"}
    fields = _fields(cfg, facts, chosen, rules)
    kinds = layer_kinds(cfg, chosen, fields["layers"])
    fields.update(per_layer_heads(cfg, chosen, kinds, fields["layers"], fields["heads"]))
    base = {"head_dim": fields.get("head_dim", 0), "num_key_value_heads": fields.get("kv_heads", fields["heads"])}
    fields.update(per_layer_shapes(cfg, chosen, kinds, fields["layers"], base))
    if kinds is None or not any(chosen.kinds[k].attention == "sliding" for k in kinds if k in chosen.kinds):
        fields.pop("sliding_window", None)  # stated, but no layer attends through a window
    order = (*FIELD_ORDER, *(f.name for f in _author_fields(chosen)))
    items: list[ast.ModelItem] = [field_item(key, fields[key]) for key in order if key in fields]
    items += _choices(cfg, choice_facts, rules)
    moe_facts = {k: v for k, v in in_blocks.items() if FIELDS[k].block == "moe"}
    ssm_facts = {k: v for k, v in in_blocks.items() if FIELDS[k].block == "ssm"}
    ssm = (ssm_block(cfg, ssm_facts, fields["hidden"], rules) or short_conv_block(cfg, rules)) \
        if _has_ssm(chosen) else None
    blocks = (moe_block(cfg, moe_facts, rules), dims_block("linear", cfg, stated_keys(cfg, rules, "linear")),
              ssm, mla_block(cfg, rules))
    items += [block for block in blocks if block is not None]
    if kinds is not None:
        items.append(stack(kinds, chosen))
    model_name = _identifier(name or model_type or "imported")
    model = ast.Model(ast.Name(model_name), ast.Name(chosen.name), tuple(items))
    text = _noted(format_file(ast.File("<import>", (model,))), composite)
    return ImportedModel(model, text, chosen.name, tuple(warnings), composite[0] if composite else None)


def _noted(text: str, notes: Sequence[str]) -> str:
    """Return the .hpf text under a comment saying each note (a composite config priced as its text model)."""
    lines: list[str] = []
    for note in notes:
        line = "// hpdsl import-hf:"
        for word in note.split():
            if len(line) + 1 + len(word) > 100:
                lines.append(line)
                line = "//  "
            line += " " + word
        lines.append(line)
    return "".join(f"{line}\n" for line in lines) + text


def check_imported(imported: ImportedModel, profile_paths: Sequence[str | Path] = ()) -> None:
    """Raise HfImportError unless the imported model compiles with the stdlib and `profile_paths`.

    The importer checks each value it reads; this is the last word on what the
    combination means (a dense layer with no stated width, heads that do not
    divide), so `import-hf` never writes a model the compiler refuses.
    """
    from hpdsl.api import check, parse
    from hpdsl.loader import load_paths

    loaded = load_paths(list(profile_paths), stdlib=True)
    try:
        parsed = parse(imported.text, "<import>")
    except SpecError as exc:  # a layer_types list with no pattern, past the parser's line limit
        raise HfImportError(f"the config makes a model hpdsl cannot write: {exc}", "layer_types") from None
    _, diagnostics = check([*loaded.files, parsed])
    errors = [d.message for d in diagnostics if d.is_error and d.span.file == "<import>"]
    if errors:
        # The field a message names last is the one it refuses ("layers of kind ... states no ffn_width").
        found = sorted((m.start(), name) for name, field in FIELDS.items() if field.hf
                       for m in re.finditer(rf"\b{name}\b", errors[0]))
        key = FIELDS[found[-1][1]].hf[0] if found else ""
        named = f" (config key {key})" if key else ""
        raise HfImportError(f"the config makes a model hpdsl refuses: {'; '.join(errors)}{named}", key)


def _has_ssm(profile: ProfileIR) -> bool:
    return any(kind.attention == "ssm" for kind in profile.kinds.values())


def _pick_profile(config: Mapping[str, Any], model_type: str, profiles: Mapping[str, ProfileIR],
                  wanted: str | None, allow_unknown: bool) -> tuple[ProfileIR, list[str]]:
    """Return the profile pricing the config, and a warning when `wanted` forces one that does not list its type."""
    if wanted is not None:
        if wanted not in profiles:
            raise HfImportError(f"--profile {wanted}: no such profile; the profiles are "
                                f"{', '.join(sorted(profiles))}", "model_type")
        forced = profiles[wanted]
        if model_type in forced.model_types:
            return forced, []
        listed = " ".join(forced.model_types) or "none"
        return forced, [f"--profile {wanted} forces a profile whose model_types ({listed}) do not include "
                        f"{model_type or 'the config'}'s: its facts for every model_type hold, transformers' "
                        "defaults for keys the config leaves out are not known, and every stated key must be "
                        "one the profile's import rules map"]
    for name in sorted(profiles):
        if model_type and model_type in profiles[name].model_types:
            return profiles[name], []
    check_keys(config, None, None, model_type, forced=False, allow_unknown=allow_unknown, profiles=profiles)
    known = {t: n for n, p in sorted(profiles.items()) for t in p.model_types}
    listed = ", ".join(f"{n} ({' '.join(t for t, m in known.items() if m == n)})"
                       for n in sorted(set(known.values())))
    raise HfImportError(f"no profile prices model_type {model_type!r}; the profiles that price "
                        f"model types are {listed} (--profile NAME prices it with one of "
                        f"{', '.join(sorted(profiles))}; --profiles PATH adds your own)", "model_type")


def _stated_facts(cfg: Config, rules: Rules) -> dict[str, Any]:
    """Return the bool facts the config states (or transformers defaults); they beat the profile's facts."""
    sources = {key: cfg.source(rules.keys(key)) for key in FLAG_FIELDS if key != "tie_embeddings"}
    stated = {key: None if source is None else flag_at(cfg, source) for key, source in sources.items()}
    tie = cfg.required("tie_word_embeddings")
    stated["tie_embeddings"] = None if tie is None else flag(tie, "tie_word_embeddings")
    # A profile whose model ignores attention_bias (Phi) lists it on its own ignore list; one whose
    # model biases only some projections with it (GLM-4.5: q, k, v) maps it to the field it states.
    bias = None if "attention_bias" in rules.ignored or "attention_bias" in rules.mapped \
        else flag_at(cfg, "attention_bias")
    if bias is not None:
        stated.update(qkv_bias=bias, o_bias=bias)
    if cfg.get("qkv_bias") is not None:
        stated["qkv_bias"] = flag_at(cfg, "qkv_bias")
    use_bias = flag_at(cfg, "use_bias")
    if use_bias is not None:  # StarCoder2: every projection and norm, or none
        stated.update(qkv_bias=use_bias, o_bias=use_bias, mlp_bias=use_bias)
    norm = _norm(cfg)
    if norm is not None:
        stated["norm_bias"] = norm == "layernorm"
    return {key: value for key, value in stated.items() if value is not None}


def _norm(cfg: Config) -> str | None:
    """Return the norm a config's epsilon key names; None where the key says nothing (the profile's facts)."""
    if "rms_norm_eps" in cfg.stated:
        return "rmsnorm"
    if "layer_norm_eps" in cfg.stated:
        return "layernorm"
    return None  # T5's layer_norm_epsilon is an RMSNorm's, GPT-2's a LayerNorm's


def _fields(cfg: Config, facts: Mapping[str, Any], profile: ProfileIR, rules: Rules) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key in INT_FIELDS:
        source = cfg.source(rules.keys(key))
        if source is None:
            continue
        value = cfg.get(source)
        if key == "kv_heads" and value == 0 and not isinstance(value, bool):
            continue  # some configs write 0 for "as many as the query heads"
        fields[key] = whole(value, source, key)
    for key in FLOAT_FIELDS:
        source = cfg.source(rules.keys(key))
        if source is not None:
            fields[key] = number(cfg.get(source), source, key)
    fields["layers"] = _layers(cfg, profile, rules)
    fields.update(_author_values(cfg, profile, rules))
    if "ffn_width" in fields:
        fields["ffn_width"] = whole(adjusted_width(cfg, rules, fields["ffn_width"]), "block_ff_dim", "ffn_width")
    _derive(fields, rules, {f.name: f for f in _author_fields(profile)})
    mla = stated_keys(cfg, rules, "mla")
    if mla and cfg.get(mla.get("kv_lora_rank", "")):
        fields.pop("head_dim", None)  # MLA prices heads with v_head_dim
    if not fields.get("mtp"):
        fields.pop("mtp", None)
    for key, value in facts.items():
        if isinstance(value, bool):
            fields[key] = value
        else:
            fields.setdefault(key, value)
    missing = [k for k in ("hidden", "heads", "vocab") if k not in fields]
    if missing:
        key = (rules.keys(missing[0]) or (missing[0],))[0]
        raise HfImportError(f"the config states no {key}; a model needs it", key)
    return fields


def _author_fields(profile: ProfileIR) -> list[Field]:
    """Return the top-level author fields the profile declares (`field NAME: ...`), which its maps may write."""
    return [field for field in profile.fields if field.name not in FIELDS and field.block is None]


def _author_values(cfg: Config, profile: ProfileIR, rules: Rules) -> dict[str, Any]:
    """Return the value of each author field a mapped config key states, checked against its declaration."""
    values: dict[str, Any] = {}
    for field in _author_fields(profile):
        source = cfg.source(rules.keys(field.name))
        if source is None:
            continue
        value = cfg.get(source)
        if field.type == "int":
            values[field.name] = whole(value, source, field.name, row=field)
        elif field.type == "bool":
            values[field.name] = flag(value, source)
        elif field.type == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
            values[field.name] = float(value)
        elif field.type == "string" and isinstance(value, str):
            values[field.name] = value
        else:
            raise HfImportError(f"{source} is {value!r}; {field.name} takes a {field.type}", source)
    return values


def _derive(fields: dict[str, Any], rules: Rules, author: Mapping[str, Field]) -> None:
    """Fill each field the config leaves unset that a `derive` rule computes from the stated ones."""
    for field, expr in rules.derives.items():
        if field in fields:
            continue
        value = evaluate_dim(expr, fields)
        if value is None:
            continue  # a field it reads is not stated either
        if field in FLOAT_FIELDS or getattr(author.get(field), "type", None) == "float":
            fields[field] = float(value)  # a share (rotary_fraction = rotary_dim / head_dim) need not be whole
            continue
        if value.denominator != 1:
            raise HfImportError(f"derive {field} = {expr.text} is {value}, not a whole number", field)
        fields[field] = whole(int(value), f"derive {field} = {expr.text}", field, row=author.get(field))


def _layers(cfg: Config, profile: ProfileIR, rules: Rules) -> int:
    keys = rules.keys("layers") or ("num_hidden_layers",)
    layers = first(cfg, keys)
    if layers is None:
        raise HfImportError(f"the config states no {keys[0]}; a model needs it", keys[0])
    layers = whole(layers, keys[0], "layers")
    if {"encoder", "decoder"} <= set(profile.kinds):
        decoder = cfg.get("num_decoder_layers")
        decoder = layers if decoder is None else whole(decoder, "num_decoder_layers", "layers")
        return whole(layers + decoder, "num_hidden_layers + num_decoder_layers", "layers")
    return layers


def _choices(cfg: Config, facts: Mapping[str, str], rules: Rules) -> list[ast.ModelItem]:
    choices = [(key, value) for key, value in facts.items() if cfg.source(rules.keys(key)) is None]
    choices += _mapped_choices(cfg, rules)
    norm = _norm(cfg)
    if norm is not None:
        choices = [c for c in choices if c[0] != "norm"] + [("norm", norm)]
    proj = str(cfg.get("feed_forward_proj") or "")
    if proj:
        choices = [c for c in choices if c[0] != "mlp"]
        choices.append(("mlp", "gated" if proj.startswith("gated-") else "plain"))
    key = next((k for k in ACTIVATION_KEYS if cfg.get(k) is not None), None)
    if key is not None:
        choices = [c for c in choices if c[0] != "activation"]  # the config's beats the profile's fact
        stated = str(cfg.get(key))
        act = ACTIVATIONS.get(stated.removeprefix("gated-") if key == "feed_forward_proj" else stated)
        if act is None:
            raise HfImportError(f"{key} is {stated!r}; hpdsl prices the activations "
                                f"{', '.join(sorted(ACTIVATIONS))}", key)
        choices.append(("activation", act))
    return [ast.Choice(ast.Name(key), ast.Name(value)) if key in KEYWORD_CHOICES else field_item(key, value)
            for key, value in choices]


def _mapped_choices(cfg: Config, rules: Rules) -> list[tuple[str, str]]:
    """Return each choice field a mapped key states (`map rope_scaling.rope_type -> rope_type`), checked."""
    mapped: list[tuple[str, str]] = []
    for name, field in FIELDS.items():
        source = cfg.source(rules.keys(name)) if field.type == "choice" and field.block is None else None
        if source is None:
            continue
        value = cfg.get(source)
        if not isinstance(value, str) or value not in field.choices:
            raise HfImportError(f"{source} is {value!r}; {name} is one of {', '.join(field.choices)} "
                                f"({field.meaning})", source)
        mapped.append((name, value))
    return mapped


def _identifier(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "imported"
    return name if not name[0].isdigit() else "m_" + name
