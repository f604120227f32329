"""A HuggingFace config.json into a model .hpf that the compiler accepts and fmt leaves unchanged.

The importer never guesses. The profile comes from the config's `model_type`
through the `model_types` the profiles declare (never from the model's name),
or from `profile=`; an unknown type is an error listing the profiles. A key the
config leaves out has the value transformers' config class gives it
(hpdsl/importers/hf_keys.py DEFAULTS, tying included), else the profile's
`facts`. A composite config's language model is read from `text_config`, its
head's tying from the top level, as transformers does. Every key is read, on
the documented list of keys irrelevant to cost (hf_keys.IGNORED), or an error
naming it (`allow_unknown` downgrades that to a loud warning). Field aliases
are the FIELDS rows' `hf` keys (hpdsl/model/fields.py; first stated wins).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from hpdsl import ast
from hpdsl.errors import HpdslError, SpecError
from hpdsl.ir.nodes import ProfileIR
from hpdsl.ir.stack import compress_kinds
from hpdsl.importers.hf_hybrid import HYBRID_TYPES, PatternError, normalise
from hpdsl.importers.hf_hybrid import READ_KEYS as HYBRID_KEYS
from hpdsl.importers.hf_keys import COMPOSITE_KEYS, DEFAULTS, READ, irrelevant
from hpdsl.model.fields import FIELDS, MAX_DIMENSION, block_fields, block_flags

ALIASES: dict[str, tuple[str, ...]] = {
    name: field.hf for name, field in FIELDS.items()
    if field.block is None and field.hf and field.type == "int" and name != "layers"}
"""Top-level count field → HF config keys, in the order the first stated one wins (hpdsl/model/fields.py)."""

FLAGS: dict[str, tuple[str, ...]] = {
    name: field.hf for name, field in FIELDS.items() if field.block is None and field.hf and field.type == "bool"}
"""Top-level flag field → HF config keys."""

FIELD_ORDER = tuple(name for name, field in FIELDS.items() if field.block is None and field.type != "choice")
"""The order the importer writes top-level fields in: the table's."""

LINEAR_FIELDS = {name: field.hf[0] for name, field in block_fields("linear").items()}
MLA_FIELDS = {name: field.hf[0] for name, field in block_fields("mla").items()}
HF_KEYS = frozenset(key for field in FIELDS.values() for key in field.hf)
"""Every config key a FIELDS row reads."""
ACTIVATION_KEYS = ("hidden_act", "hidden_activation", "activation_function", "feed_forward_proj")
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh",
               "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu", "relu2": "relu2"}


@attrs.frozen(auto_exc=True)
class HfImportError(HpdslError):
    """A config the importer cannot express; the message names the config field."""

    field: str = ""


@attrs.frozen
class ImportedModel:
    """The result of an import: the model's AST, its .hpf text and what was assumed."""

    model: ast.Model
    text: str
    profile: str
    warnings: tuple[str, ...] = ()


def import_hf_file(path: str | Path, *, profiles: Mapping[str, ProfileIR], name: str | None = None,
                   profile: str | None = None, allow_unknown: bool = False) -> ImportedModel:
    """Read a config.json and import it (see import_hf_config)."""
    try:
        config = json.loads(Path(path).read_text(), parse_constant=_no_constant)
    except (OSError, UnicodeDecodeError) as exc:
        raise HfImportError(f"{path}: cannot read the config: {exc}") from None
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

    model_type, outer_type = _model_types(config)
    warnings = _unknown_keys(config, allow_unknown)  # first: a refused key is named whatever the type
    chosen = _pick_profile(model_type, profiles, profile)
    cfg = _effective(config, model_type, outer_type)
    warnings += _unbuilt_block_keys(cfg, chosen, allow_unknown)
    towers = sorted(k for k, v in config.items() if k.endswith("_config") and k != "text_config"
                    and isinstance(v, Mapping) and not irrelevant(k, v))
    if towers:
        warnings.append(f"imported text_config only; {', '.join(towers)} is not part of the model "
                        "(hpdsl prices the language model; a vision tower is a model of its own "
                        "with the 'vision' profile)")
    facts = {**chosen.facts_for(model_type), **_stated_facts(cfg)}
    block_facts = {k: facts.pop(k) for k in list(facts) if k in block_flags()}
    choice_facts = {k: str(facts.pop(k)) for k in list(facts) if FIELDS[k].type == "choice"}
    fields = _fields(cfg, facts, chosen)
    kinds = _layer_kinds(cfg, chosen, fields["layers"])
    if kinds is None or "sliding_attention" not in kinds:
        fields.pop("sliding_window", None)  # stated, but no layer attends through a window
    items: list[ast.ModelItem] = [_field(key, fields[key]) for key in FIELD_ORDER if key in fields]
    items += _choices(cfg, choice_facts)
    moe_facts = {k: v for k, v in block_facts.items() if FIELDS[k].block == "moe"}
    ssm_facts = {k: v for k, v in block_facts.items() if FIELDS[k].block == "ssm"}
    items += [block for block in (_moe(cfg, moe_facts), _block("linear", cfg, LINEAR_FIELDS),
                                  _ssm(cfg, ssm_facts, fields["hidden"]) if _has_ssm(chosen) else None,
                                  _mla(cfg)) if block is not None]
    if kinds is not None:
        items.append(_stack(kinds, chosen))
    model_name = _identifier(name or model_type or "imported")
    model = ast.Model(ast.Name(model_name), ast.Name(chosen.name), tuple(items))
    text = format_file(ast.File("<import>", (model,)))
    return ImportedModel(model, text, chosen.name, tuple(warnings))


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


def _model_types(config: Mapping[str, Any]) -> tuple[str, str]:
    """Return (the language model's model_type, the config's own): text_config's wins for the first."""
    outer = str(config.get("model_type") or "")
    text = config.get("text_config")
    inner = str(text.get("model_type") or "") if isinstance(text, Mapping) else ""
    return inner or outer, outer


def _effective(config: Mapping[str, Any], model_type: str, outer_type: str) -> _Config:
    """Return the keys the language model is built from, with transformers' precedence.

    A composite config builds its language model from text_config; the head's
    tying is the outer model's, read from the top level (stated, else the outer
    config class's default), whatever text_config says.
    """
    text = config.get("text_config")
    if not isinstance(text, Mapping):
        defaults = DEFAULTS.get(model_type, {})
        try:
            stated = normalise(model_type, config, defaults)  # a Megatron-style hybrid's pattern and keys
        except PatternError as exc:
            raise HfImportError(str(exc), exc.field) from None
        return _Config(stated, defaults, model_type)
    stated = dict(text)
    defaults = dict(DEFAULTS.get(model_type, {}))
    for key in COMPOSITE_KEYS:
        stated.pop(key, None)
        if key in config:
            stated[key] = config[key]
        elif key in DEFAULTS.get(outer_type, {}):
            defaults[key] = DEFAULTS[outer_type][key]
        else:
            defaults.pop(key, None)
    return _Config(stated, defaults, outer_type or model_type)


@attrs.frozen
class _Config:
    """A config's stated keys over transformers' defaults for its model_type (hf_keys.DEFAULTS)."""

    stated: Mapping[str, Any]
    defaults: Mapping[str, Any]
    model_type: str

    def get(self, key: str, default: Any = None) -> Any:
        """Return the stated value, else transformers' default, else `default`."""
        if key in self.stated:
            return self.stated[key]
        return self.defaults.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.stated or self.defaults.get(key) is not None

    def required(self, key: str) -> Any:
        """Return a key that changes the count: stated or defaulted, else an error naming it."""
        if key in self.stated:
            return self.stated[key]
        if key in self.defaults:
            return self.defaults[key]
        raise HfImportError(f"the config states no {key}, and hpdsl's table of transformers' defaults "
                            f"(hpdsl/importers/hf_keys.py) has none for model_type "
                            f"{self.model_type!r}; state it in the config", key)


def _unknown_keys(config: Mapping[str, Any], allow_unknown: bool) -> list[str]:
    """Return warnings for unknown keys under allow_unknown; else raise naming the first one."""
    unknown = [key for key, value in config.items() if not _known(key, value)]
    if _model_types(config)[0] not in HYBRID_TYPES:  # only a hybrid's config class reads these
        unknown += [key for key in config if key in HYBRID_KEYS]
    text = config.get("text_config")
    if isinstance(text, Mapping):
        unknown += [f"text_config.{key}" for key, value in text.items() if not _known(key, value)]
    if not unknown:
        return []
    return _refuse(unknown, allow_unknown)


def _unbuilt_block_keys(cfg: _Config, profile: ProfileIR, allow_unknown: bool) -> list[str]:
    """Return warnings for (or refuse) state-space keys a profile with no `attention ssm` kind cannot build."""
    if _has_ssm(profile):
        return []
    keys = {key for field in block_fields("ssm").values() for key in field.hf}
    why = f"which profile '{profile.name}' cannot build: it has no state-space (`attention ssm`) kind"
    return _refuse([key for key in cfg.stated if key in keys], allow_unknown, why)


def _has_ssm(profile: ProfileIR) -> bool:
    return any(kind.attention == "ssm" for kind in profile.kinds.values())


def _refuse(unknown: list[str], allow_unknown: bool, why: str = "which hpdsl does not understand") -> list[str]:
    """Raise naming the first of `unknown`, or with allow_unknown return the loud warning; [] when none."""
    if not unknown:
        return []
    listed = ", ".join(unknown)
    if not allow_unknown:
        raise HfImportError(f"the config states {listed}, {why}; pricing the model without it could be "
                            "wrong (--allow-unknown imports it anyway)", unknown[0])
    return [f"IGNORED {len(unknown)} config key(s) hpdsl does not understand: {listed}. The import "
            "may price the model WRONG (--allow-unknown)"]


def _known(key: str, value: Any) -> bool:
    if key in READ or key in HF_KEYS or irrelevant(key, value):
        return True
    return key.endswith("_config") and isinstance(value, Mapping)


def _pick_profile(model_type: str, profiles: Mapping[str, ProfileIR], wanted: str | None) -> ProfileIR:
    if wanted is not None:
        if wanted not in profiles:
            raise HfImportError(f"--profile {wanted}: no such profile; the profiles are "
                                f"{', '.join(sorted(profiles))}", "model_type")
        return profiles[wanted]
    for name in sorted(profiles):
        if model_type and model_type in profiles[name].model_types:
            return profiles[name]
    known = {t: n for n, p in sorted(profiles.items()) for t in p.model_types}
    listed = ", ".join(f"{n} ({' '.join(t for t, m in known.items() if m == n)})"
                       for n in sorted(set(known.values())))
    raise HfImportError(f"no profile prices model_type {model_type!r}; the profiles that price "
                        f"model types are {listed} (--profile NAME prices it with one of "
                        f"{', '.join(sorted(profiles))}; --profiles PATH adds your own)", "model_type")


def _first(cfg: _Config, names: Sequence[str]) -> Any:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    return None


def _stated_facts(cfg: _Config) -> dict[str, Any]:
    """Return the bool facts the config states (or transformers defaults); they beat the profile's facts."""
    stated = {key: next((_flag_at(cfg, n) for n in names if cfg.get(n) is not None), None)
              for key, names in FLAGS.items()}
    tie = cfg.required("tie_word_embeddings")
    stated["tie_embeddings"] = None if tie is None else _flag(tie, "tie_word_embeddings")
    bias = _flag_at(cfg, "attention_bias")
    if bias is not None:
        stated.update(qkv_bias=bias, o_bias=bias)
    if cfg.get("qkv_bias") is not None:
        stated["qkv_bias"] = _flag_at(cfg, "qkv_bias")
    use_bias = _flag_at(cfg, "use_bias")
    if use_bias is not None:  # StarCoder2: every projection and norm, or none
        stated.update(qkv_bias=use_bias, o_bias=use_bias, mlp_bias=use_bias)
    norm = _norm(cfg)
    if norm is not None:
        stated["norm_bias"] = norm == "layernorm"
    return {key: value for key, value in stated.items() if value is not None}


def _flag_at(cfg: _Config, key: str) -> bool | None:
    """Return the flag a config key states (None: unset)."""
    value = cfg.get(key)
    return None if value is None else _flag(value, key)


def _flag(value: Any, key: str) -> bool:
    """Return a config's flag; true, false, 1 or 0, else an error naming the field it sets."""
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise HfImportError(f"{key} is {_shown(value)}; expected true or false", key)


def _norm(cfg: _Config) -> str | None:
    """Return the norm a config's epsilon key names; None where the key says nothing (the profile's facts)."""
    if "rms_norm_eps" in cfg.stated:
        return "rmsnorm"
    if "layer_norm_eps" in cfg.stated:
        return "layernorm"
    return None  # T5's layer_norm_epsilon is an RMSNorm's, GPT-2's a LayerNorm's


def _fields(cfg: _Config, facts: Mapping[str, Any], profile: ProfileIR) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, names in ALIASES.items():
        source = next((name for name in names if cfg.get(name) is not None), None)
        if source is None:
            continue
        value = cfg.get(source)
        if key == "kv_heads" and value == 0 and not isinstance(value, bool):
            continue  # some configs write 0 for "as many as the query heads"
        fields[key] = _whole(value, source, key)
    fields["layers"] = _layers(cfg, profile)
    if "ffn_width" not in fields and cfg.model_type == "gpt2" and "hidden" in fields:
        fields["ffn_width"] = 4 * fields["hidden"]  # GPT2Config's n_inner None: GPT2MLP is 4 × n_embd wide
    if cfg.get("kv_lora_rank"):
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
        raise HfImportError(f"the config states no {ALIASES[missing[0]][0]}; a model needs it",
                            ALIASES[missing[0]][0])
    return fields


def _layers(cfg: _Config, profile: ProfileIR) -> int:
    layers = _first(cfg, FIELDS["layers"].hf)
    if layers is None:
        raise HfImportError("the config states no num_hidden_layers; a model needs it",
                            "num_hidden_layers")
    layers = _whole(layers, "num_hidden_layers", "layers")
    if {"encoder", "decoder"} <= set(profile.kinds):
        decoder = cfg.get("num_decoder_layers")
        decoder = layers if decoder is None else _whole(decoder, "num_decoder_layers", "layers")
        return _whole(layers + decoder, "num_hidden_layers + num_decoder_layers", "layers")
    return layers


def _count(cfg: _Config, key: str) -> int | None:
    """Return a pattern's count (a step, an interval, a first layer): None when unset or 0."""
    value = cfg.get(key)
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None
    return _whole(value, key)


def _no_constant(name: str) -> Any:
    """Refuse JSON's non-standard Infinity and NaN (json.loads accepts them); no config states one."""
    raise ValueError(f"{name} is not a number a config can state")


def _whole(value: Any, key: str, field: str | None = None) -> int:
    """Return `value` as a whole number within FIELDS[field]'s bounds, else an error naming `key`.

    `field` is the FIELDS row the value becomes (hpdsl/model/fields.py); None: a
    count that is not a field (a pattern's step), bounded like a layer count.
    """
    row = FIELDS.get(field or "", FIELDS["layers"])
    low = row.minimum if row.minimum is not None else 0
    high = row.maximum if row.maximum is not None else MAX_DIMENSION
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)
                                        and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise HfImportError(f"{key} is {_shown(value)}; expected a whole number", key)
    if not low <= value <= high:
        raise HfImportError(f"{key} is {_shown(value)}; expected a whole number from {low} to {high}", key)
    return int(value)


def _shown(value: Any) -> str:
    """Return a value for a message, cut short (a config may hold a 5,000-digit number)."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10 ** 30 else "a number past 10^30"
    return text if len(text) <= 60 else text[:57] + "..."


def _choices(cfg: _Config, facts: Mapping[str, str]) -> list[ast.Choice]:
    choices = list(facts.items())
    norm = _norm(cfg)
    if norm is not None:
        choices = [c for c in choices if c[0] != "norm"] + [("norm", norm)]
    proj = str(cfg.get("feed_forward_proj") or "")
    if proj:
        choices = [c for c in choices if c[0] != "mlp"]
        choices.append(("mlp", "gated" if proj.startswith("gated-") else "plain"))
    key = next((k for k in ACTIVATION_KEYS if cfg.get(k) is not None), None)
    if key is not None:
        stated = str(cfg.get(key))
        act = ACTIVATIONS.get(stated.removeprefix("gated-") if key == "feed_forward_proj" else stated)
        if act is None:
            raise HfImportError(f"{key} is {stated!r}; hpdsl prices the activations "
                                f"{', '.join(sorted(ACTIVATIONS))}", key)
        choices.append(("activation", act))
    return [ast.Choice(ast.Name(key), ast.Name(value)) for key, value in choices]


def _moe(cfg: _Config, facts: Mapping[str, Any]) -> ast.Block | None:
    moe = block_fields("moe")
    source = next((name for name in moe["experts"].hf if cfg.get(name) is not None), "num_experts")
    experts = cfg.get(source)
    if experts is None or (experts in (0, 1) and not isinstance(experts, bool)):
        return None  # no experts, or one: a dense feed-forward
    experts = _whole(experts, source, "experts")
    shared_width = cfg.get("shared_expert_intermediate_size")
    shared = _first(cfg, moe["shared_experts"].hf)
    if shared is None:
        shared = 1 if shared_width else 0
    values: dict[str, Any] = {
        "experts": experts,
        "top_k": _whole(_first(cfg, moe["top_k"].hf) or 1, "num_experts_per_tok", "top_k"),
        "expert_width": _whole(_first(cfg, (*moe["expert_width"].hf, "intermediate_size")),
                               "moe_intermediate_size", "expert_width"),
    }
    if shared:
        values["shared_experts"] = _whole(shared, "n_shared_experts", "shared_experts")
    if shared_width:
        # HF's Qwen MoE models give the wide shared expert a sigmoid gate (Linear(h, 1)).
        values.update(shared_width=_whole(shared_width, "shared_expert_intermediate_size", "shared_width"),
                      shared_gate=True)
    values.update({k: bool(v) for k, v in facts.items() if v})
    return ast.Block(ast.Name("moe"), tuple(_field(k, v) for k, v in values.items()))


def _block(name: str, cfg: _Config, table: Mapping[str, str]) -> ast.Block | None:
    values = {key: cfg.get(source) for key, source in table.items()}
    stated = {k: v for k, v in values.items() if v is not None}
    if not stated:
        return None
    missing = [table[k] for k, v in values.items() if v is None]
    if missing:
        raise HfImportError(f"the config states {sorted(table[k] for k in stated)} but not "
                            f"{missing}; declare all of {sorted(table.values())}", missing[0])
    return ast.Block(ast.Name(name), tuple(_field(k, _whole(v, table[k], k)) for k, v in stated.items()))


def _ssm(cfg: _Config, facts: Mapping[str, Any], hidden: int) -> ast.Block | None:
    """Return the ssm block of a state-space (Mamba) config: dims, biases, and the profile's norm fact."""
    ssm = block_fields("ssm")
    sources = {name: next((key for key in field.hf if cfg.get(key) is not None), None)
               for name, field in ssm.items() if field.hf}
    if sources["ssm_state"] is None:
        return None
    values: dict[str, Any] = {}
    for name, source in sources.items():
        field = ssm[name]
        if source is None:
            if field.required:
                raise HfImportError(f"an SSM config ({sources['ssm_state']} set) must state "
                                    f"{field.hf[0]}", field.hf[0])
            continue
        value = cfg.get(source)
        if name == "ssm_dt_rank" and value == "auto":
            value = math.ceil(hidden / 16)  # JambaConfig: "auto" is ⌈hidden_size / 16⌉
        values[name] = _flag(value, source) if field.type == "bool" else _whole(value, source, name)
    _check_head_dim(cfg, values, hidden)
    values.update({k: bool(v) for k, v in facts.items()})
    return ast.Block(ast.Name("ssm"), tuple(_field(k, v) for k, v in values.items()))


def _check_head_dim(cfg: _Config, values: Mapping[str, Any], hidden: int) -> None:
    """Refuse a Mamba-2 head dim that does not split d_inner = ssm_expand × hidden into ssm_heads heads."""
    stated = cfg.get("mamba_d_head")
    if stated is None or stated == "auto" or "ssm_heads" not in values:
        return
    head_dim = _whole(stated, "mamba_d_head")
    if head_dim * values["ssm_heads"] != values["ssm_expand"] * hidden:
        raise HfImportError(f"mamba_d_head {head_dim} × mamba_n_heads {values['ssm_heads']} is not "
                            f"mamba_expand × hidden_size = {values['ssm_expand'] * hidden}", "mamba_d_head")


def _mla(cfg: _Config) -> ast.Block | None:
    if not cfg.get("kv_lora_rank"):
        return None
    values = {key: cfg.get(source) for key, source in MLA_FIELDS.items()}
    values["q_lora_rank"] = values["q_lora_rank"] or 0
    missing = [MLA_FIELDS[k] for k, v in values.items() if v is None]
    if missing:
        raise HfImportError(f"an MLA config (kv_lora_rank set) must state {missing[0]}", missing[0])
    return ast.Block(ast.Name("mla"), tuple(_field(k, _whole(v, MLA_FIELDS[k], k)) for k, v in values.items()))


def _stack(kinds: list[str], profile: ProfileIR) -> ast.Stack:
    """Return the explicit stack of a config that says per layer what it is."""
    unknown = sorted(set(kinds) - set(profile.kinds))
    if unknown:
        raise HfImportError(f"the config's layers name {unknown}, which profile "
                            f"'{profile.name}' has no kinds for (it has {', '.join(profile.kinds)})",
                            "layer_types")
    return ast.Stack(compress_kinds(kinds))


def _layer_kinds(cfg: _Config, profile: ProfileIR, layers: int) -> list[str] | None:
    """Return every layer's kind when the config's patterns say it; None to derive the stack.

    The mixer comes from `layer_types`, `full_attention_interval`,
    `sliding_window_pattern` or the sliding-window rule; the feed-forward from
    `decoder_sparse_step`, `mlp_only_layers` or `moe_layer_freq`. All are lowered
    to the same per-layer kind list, which the stack compresses into runs.
    """
    periodic = _period_kinds(cfg, layers)
    if periodic is not None:
        return periodic
    mixers = _mixer_kinds(cfg, layers)
    ffns = _ffn_kinds(cfg, profile, layers)
    if mixers is not None and ffns is not None:
        raise HfImportError("the config patterns both the mixers and the feed-forwards; hpdsl's "
                            "kinds name one of them", "layer_types")
    kinds = mixers if mixers is not None else ffns
    if kinds is not None and set(kinds) == {"full_attention"} and "full_attention" not in profile.kinds:
        return None  # every layer is the profile's plain attention layer
    return kinds


def _period_kinds(cfg: _Config, layers: int) -> list[str] | None:
    """Return Jamba's kinds, MIXER_FFN per layer, from its period/offset rules; None without them.

    Layer i attends when i % attn_layer_period == attn_layer_offset (else it is a
    Mamba layer) and routes through experts when i % expert_layer_period ==
    expert_layer_offset (else dense), as JambaConfig's layers_block_type and
    layers_num_experts say.
    """
    if cfg.get("attn_layer_period") is None and cfg.get("expert_layer_period") is None:
        return None
    rules = {}
    for rule in ("attn_layer", "expert_layer"):
        period = _whole(cfg.required(f"{rule}_period"), f"{rule}_period")
        offset = _whole(cfg.required(f"{rule}_offset"), f"{rule}_offset", "first_k_dense")
        if offset >= period:
            raise HfImportError(f"{rule}_offset is {offset}; it must be below {rule}_period {period}",
                                f"{rule}_offset")
        rules[rule] = (period, offset)
    (a_period, a_offset), (e_period, e_offset) = rules["attn_layer"], rules["expert_layer"]
    experts = cfg.get("num_experts")
    routed = experts is not None and not isinstance(experts, bool) and experts not in (0, 1)
    return [("attention" if i % a_period == a_offset else "mamba")
            + ("_moe" if routed and i % e_period == e_offset else "_dense") for i in range(layers)]


def _mixer_kinds(cfg: _Config, layers: int) -> list[str] | None:
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        if len(types) < layers:
            raise HfImportError(f"layer_types lists {len(types)} layers, but num_hidden_layers "
                                f"is {layers}", "layer_types")
        return [str(t) for t in types[:layers]]
    indices = cfg.get("attn_layer_indices")
    if isinstance(indices, list):  # Bamba: attention at these layers, Mamba-2 elsewhere
        return ["full_attention" if i in indices else "linear_attention" for i in range(layers)]
    interval = _count(cfg, "full_attention_interval")
    if interval:
        return ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                for i in range(layers)]
    if cfg.get("sliding_window") is None or cfg.get("use_sliding_window") is False:
        return None
    pattern = _count(cfg, "sliding_window_pattern") or _count(cfg, "_sliding_window_pattern")
    if pattern:  # Gemma: every pattern-th layer attends to the whole sequence
        return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
    first = _count(cfg, "max_window_layers") if cfg.get("use_sliding_window") else 0
    return ["sliding_attention" if i >= (first or 0) else "full_attention" for i in range(layers)]


def _ffn_kinds(cfg: _Config, profile: ProfileIR, layers: int) -> list[str] | None:
    step = _count(cfg, "decoder_sparse_step") or 1
    freq = _count(cfg, "moe_layer_freq") or 1
    mlp_only = cfg.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list):
        raise HfImportError(f"mlp_only_layers is {_shown(mlp_only)}; expected a list of layer numbers",
                            "mlp_only_layers")
    if step == 1 and freq == 1 and not mlp_only:
        return None
    field = "mlp_only_layers" if mlp_only else ("decoder_sparse_step" if step != 1 else "moe_layer_freq")
    if not {"dense", "moe"} <= set(profile.kinds):
        raise HfImportError(f"{field} makes some layers dense, but profile '{profile.name}' has "
                            "no dense and moe kinds to say so", field)
    first = _count(cfg, "first_k_dense_replace") or 0
    return ["dense" if i in mlp_only or (i + 1) % step or i < first or (i - first) % freq else "moe"
            for i in range(layers)]


def _field(key: str, value: Any) -> ast.Field:
    kind: ast.LiteralKind = "bool" if isinstance(value, bool) else "int"
    return ast.Field(ast.Name(key), ast.Literal(value, kind))


def _identifier(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "imported"
    return name if not name[0].isdigit() else "m_" + name
