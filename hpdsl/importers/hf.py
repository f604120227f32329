"""A HuggingFace config.json into a model .hpf that the compiler accepts and fmt leaves unchanged.

The profile comes from the config's `model_type` through the `model_types` the
profiles declare (never from the model's name); an unknown type falls back to
`default` with a warning. Facts a config of that type does not state come from
the profile's `facts` blocks. Field aliases follow
docs/reference.md#hf-config-fields (first populated alias wins). What the
language cannot express is an error naming the config field: nothing is dropped
silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from hpdsl import ast
from hpdsl.errors import HpdslError
from hpdsl.ir.nodes import ProfileIR
from hpdsl.ir.stack import compress_kinds
from hpdsl.model.fields import FIELDS, block_fields

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


def import_hf_file(path: str | Path, *, profiles: Mapping[str, ProfileIR],
                   name: str | None = None) -> ImportedModel:
    """Read a config.json and import it (see import_hf_config)."""
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise HfImportError(f"{path}: cannot read the config: {exc}") from None
    except json.JSONDecodeError as exc:
        raise HfImportError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    if not isinstance(config, dict):
        raise HfImportError(f"{path}: a config.json holds one JSON object")
    return import_hf_config(config, profiles=profiles, name=name or Path(path).parent.name)


def import_hf_config(config: Mapping[str, Any], *, profiles: Mapping[str, ProfileIR],
                     name: str | None = None) -> ImportedModel:
    """Turn a HuggingFace config mapping into a model .hpf (text and AST)."""
    from hpdsl.fmt import format_file

    text_config = config.get("text_config")
    cfg: Mapping[str, Any] = text_config if isinstance(text_config, Mapping) else config
    model_type = str(cfg.get("model_type") or config.get("model_type") or "")
    profile, warnings = _pick_profile(model_type, profiles)
    if cfg is not config:
        towers = sorted(k for k, v in config.items() if k.endswith("_config") and k != "text_config"
                        and isinstance(v, Mapping))
        if towers:
            warnings.append(f"imported text_config only; {', '.join(towers)} is not part of the model "
                            "(hpdsl prices the language model; a vision tower is a model of its own "
                            "with the 'vision' profile)")
    facts = {**profile.facts_for(model_type), **_stated_facts(cfg)}
    fields = _fields(cfg, facts, profile)
    items: list[ast.ModelItem] = [_field(key, fields[key]) for key in FIELD_ORDER if key in fields]
    items += _choices(cfg, facts)
    items += [block for block in (_moe(cfg), _block("linear", cfg, LINEAR_FIELDS),
                                  _mla(cfg)) if block is not None]
    stack = _stack(cfg, profile, fields)
    if stack is not None:
        items.append(stack)
    model_name = _identifier(name or model_type or "imported")
    model = ast.Model(ast.Name(model_name), ast.Name(profile.name), tuple(items))
    text = format_file(ast.File("<import>", (model,)))
    return ImportedModel(model, text, profile.name, tuple(warnings))


def _pick_profile(model_type: str, profiles: Mapping[str, ProfileIR]) -> tuple[ProfileIR, list[str]]:
    for name in sorted(profiles):
        if model_type and model_type in profiles[name].model_types:
            return profiles[name], []
    if "default" not in profiles:
        raise HfImportError("no profile prices model_type "
                            f"{model_type!r} and no 'default' profile is in scope", "model_type")
    return profiles["default"], [f"no profile declares model_type {model_type!r}; "
                                 "pricing it with the 'default' profile"]


def _first(cfg: Mapping[str, Any], names: Sequence[str]) -> Any:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    return None


def _stated_facts(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Return the bool facts the config states itself (they beat the profile's facts)."""
    stated = {key: _first(cfg, names) for key, names in FLAGS.items()}
    bias = cfg.get("attention_bias")
    if bias is not None:
        stated.update(qkv_bias=bias, o_bias=bias)
    if "rms_norm_eps" in cfg:
        stated["norm_bias"] = False
    elif "layer_norm_eps" in cfg:
        stated["norm_bias"] = True
    return {key: bool(value) for key, value in stated.items() if value is not None}


def _fields(cfg: Mapping[str, Any], facts: Mapping[str, Any], profile: ProfileIR) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, names in ALIASES.items():
        value = _first(cfg, names)
        if value is not None and not isinstance(value, bool):
            fields[key] = _whole(value, names[0])
    fields["layers"] = _layers(cfg, profile)
    if fields.get("kv_heads") == 0:
        del fields["kv_heads"]
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


def _layers(cfg: Mapping[str, Any], profile: ProfileIR) -> int:
    layers = _first(cfg, ("num_hidden_layers", "num_layers"))
    if layers is None:
        raise HfImportError("the config states no num_hidden_layers; a model needs it",
                            "num_hidden_layers")
    layers = _whole(layers, "num_hidden_layers")
    if {"encoder", "decoder"} <= set(profile.kinds):
        return layers + _whole(cfg.get("num_decoder_layers") or layers, "num_decoder_layers")
    return layers


def _whole(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise HfImportError(f"{field} is {value!r}; expected a whole number", field)
    return int(value)


def _choices(cfg: Mapping[str, Any], facts: Mapping[str, Any]) -> list[ast.Choice]:
    choices = []
    if "rms_norm_eps" in cfg:
        choices.append(("norm", "rmsnorm"))
    elif "layer_norm_eps" in cfg:
        choices.append(("norm", "layernorm"))
    proj = str(cfg.get("feed_forward_proj") or "")
    act = ACTIVATIONS.get(str(cfg.get("hidden_act") or proj.removeprefix("gated-")))
    if proj:
        choices.append(("mlp", "gated" if proj.startswith("gated-") else "plain"))
    if act:
        choices.append(("activation", act))
    return [ast.Choice(ast.Name(key), ast.Name(value)) for key, value in choices]


def _moe(cfg: Mapping[str, Any]) -> ast.Block | None:
    moe = block_fields("moe")
    experts = _first(cfg, moe["experts"].hf)
    if not experts or experts <= 1:
        return None
    shared_width = cfg.get("shared_expert_intermediate_size")
    shared = _first(cfg, moe["shared_experts"].hf)
    if shared is None:
        shared = 1 if shared_width else 0
    values: dict[str, Any] = {
        "experts": _whole(experts, "num_experts"),
        "top_k": _whole(cfg.get("num_experts_per_tok") or 1, "num_experts_per_tok"),
        "expert_width": _whole(_first(cfg, (*moe["expert_width"].hf, "intermediate_size")),
                               "moe_intermediate_size"),
    }
    if shared:
        values["shared_experts"] = _whole(shared, "n_shared_experts")
    if shared_width:
        # HF's Qwen MoE models give the wide shared expert a sigmoid gate (Linear(h, 1)).
        values.update(shared_width=_whole(shared_width, "shared_expert_intermediate_size"),
                      shared_gate=True)
    return ast.Block(ast.Name("moe"), tuple(_field(k, v) for k, v in values.items()))


def _block(name: str, cfg: Mapping[str, Any], table: Mapping[str, str]) -> ast.Block | None:
    values = {key: cfg.get(source) for key, source in table.items()}
    stated = {k: v for k, v in values.items() if v is not None}
    if not stated:
        return None
    missing = [table[k] for k, v in values.items() if v is None]
    if missing:
        raise HfImportError(f"the config states {sorted(table[k] for k in stated)} but not "
                            f"{missing}; declare all of {sorted(table.values())}", missing[0])
    return ast.Block(ast.Name(name), tuple(_field(k, _whole(v, table[k])) for k, v in stated.items()))


def _mla(cfg: Mapping[str, Any]) -> ast.Block | None:
    if not cfg.get("kv_lora_rank"):
        return None
    values = {key: cfg.get(source) for key, source in MLA_FIELDS.items()}
    values["q_lora_rank"] = values["q_lora_rank"] or 0
    missing = [MLA_FIELDS[k] for k, v in values.items() if v is None]
    if missing:
        raise HfImportError(f"an MLA config (kv_lora_rank set) must state {missing[0]}", missing[0])
    return ast.Block(ast.Name("mla"), tuple(_field(k, _whole(v, MLA_FIELDS[k])) for k, v in values.items()))


def _stack(cfg: Mapping[str, Any], profile: ProfileIR, fields: Mapping[str, Any]) -> ast.Stack | None:
    """Return an explicit stack when the config says per layer what it is; None to derive it."""
    layers = fields["layers"]
    kinds = _layer_kinds(cfg, profile, layers)
    if kinds is None:
        return None
    unknown = sorted(set(kinds) - set(profile.kinds))
    if unknown:
        raise HfImportError(f"the config's layers name {unknown}, which profile "
                            f"'{profile.name}' has no kinds for", "layer_types")
    return ast.Stack(compress_kinds(kinds))


def _layer_kinds(cfg: Mapping[str, Any], profile: ProfileIR, layers: int) -> list[str] | None:
    types = cfg.get("layer_types")
    interval = cfg.get("full_attention_interval")
    if isinstance(types, list) and types:
        if len(types) < layers:
            raise HfImportError(f"layer_types lists {len(types)} layers, but num_hidden_layers "
                                f"is {layers}", "layer_types")
        return [str(t) for t in types[:layers]]
    if interval:
        return ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                for i in range(layers)]
    step = cfg.get("decoder_sparse_step") or 1
    mlp_only = cfg.get("mlp_only_layers") or []
    if step == 1 and not mlp_only:
        return None
    field = "mlp_only_layers" if mlp_only else "decoder_sparse_step"
    if not {"dense", "moe"} <= set(profile.kinds):
        raise HfImportError(f"{field} makes some layers dense, but profile '{profile.name}' has "
                            "no dense and moe kinds to say so", field)
    return ["dense" if i in mlp_only or (i + 1) % step else "moe" for i in range(layers)]


def _field(key: str, value: Any) -> ast.Field:
    kind: ast.LiteralKind = "bool" if isinstance(value, bool) else "int"
    return ast.Field(ast.Name(key), ast.Literal(value, kind))


def _identifier(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "imported"
    return name if not name[0].isdigit() else "m_" + name
