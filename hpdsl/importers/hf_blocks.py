"""A config's blocks: `moe { }`, `linear { }`, `ssm { }` and `mla { }` from the keys that state them.

Which config keys state a block's field is the profile's `map KEY -> BLOCK.FIELD`
rules (hpdsl/importers/rules.py), the first stated one winning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hpdsl import ast
from hpdsl.importers.hf_config import Config, HfImportError, field_item, first, flag, whole
from hpdsl.importers.rules import Rules
from hpdsl.model.fields import FIELDS, block_fields


def stated_keys(cfg: Config, rules: Rules, block: str) -> dict[str, str]:
    """Return a block's field → the config key that states it (the first mapped key stated, else the first mapped)."""
    table = {}
    for name in block_fields(block):
        keys = rules.keys(f"{block}.{name}")
        if keys:
            table[name] = next((key for key in keys if cfg.get(key) is not None), keys[0])
    return table


def moe_block(cfg: Config, facts: Mapping[str, Any], rules: Rules) -> ast.Block | None:
    keys = {name: rules.keys(f"moe.{name}") for name in block_fields("moe")}
    source = next((name for name in keys["experts"] if cfg.get(name) is not None), None)
    if source is None:
        return None
    experts = cfg.get(source)
    if experts is None or (experts in (0, 1) and not isinstance(experts, bool)):
        return None  # no experts, or one: a dense feed-forward
    experts = whole(experts, source, "experts")
    shared_width = first(cfg, keys["shared_width"])  # the profile's maps (Nemotron-H: moe_shared_expert_...)
    shared = first(cfg, keys["shared_experts"])
    if shared is None:
        shared = 1 if shared_width else 0
    values: dict[str, Any] = {
        "experts": experts,
        "top_k": whole(first(cfg, keys["top_k"]) or 1, "num_experts_per_tok", "top_k"),
        "expert_width": whole(first(cfg, keys["expert_width"]), "moe_intermediate_size", "expert_width"),
    }
    if shared:
        values["shared_experts"] = whole(shared, "n_shared_experts", "shared_experts")
    if shared_width:
        values["shared_width"] = whole(shared_width, keys["shared_width"][0], "shared_width")
    latent = first(cfg, keys["latent_width"])  # the profile's maps (Nemotron-H: moe_latent_size)
    if latent:
        values["latent_width"] = whole(latent, keys["latent_width"][0], "latent_width")
    if cfg.get("shared_expert_intermediate_size") and "shared_gate" not in facts:
        # HF's Qwen MoE models give the wide shared expert a sigmoid gate (Linear(h, 1)); a profile's
        # `shared_gate = false` fact says its model has none (Laguna's).
        values["shared_gate"] = True
    # A flag a profile maps a key to, stated true (Gemma 4's enable_moe_block -> moe.mlp_beside).
    values.update({name: True for name, field in block_fields("moe").items()
                   if field.type == "bool" and name not in values and not field.default
                   and keys[name] and first(cfg, keys[name]) is True})
    # The profile's flags, where they differ from the field's default (expert_bias false: Nemotron-H's).
    values.update({k: bool(v) for k, v in facts.items()
                   if FIELDS[k].type == "bool" and bool(v) != bool(FIELDS[k].default)})
    # The profile's counts, where the config states none (Llama 4's one shared expert).
    for name, value in facts.items():
        if FIELDS[name].type == "int":
            values.setdefault(name, value)
    values.update(_routing(cfg, keys))
    return ast.Block(ast.Name("moe"), tuple(field_item(k, v) for k, v in values.items()))


def _routing(cfg: Config, keys: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    """Return the routing fields the config states away from their defaults (group-limited top-k, renorm, scale)."""
    values: dict[str, Any] = {}
    for name, default in (("router_groups", 1), ("router_group_top", 1), ("norm_top_k", True),
                          ("routed_scale", 1.0)):
        stated = first(cfg, keys.get(name, ()))
        if stated is None or stated == default:
            continue
        if isinstance(default, bool):
            values[name] = bool(stated)
        elif isinstance(default, float):
            values[name] = float(stated)
        else:
            values[name] = whole(stated, keys[name][0], name)
    return values


def dims_block(name: str, cfg: Config, table: Mapping[str, str]) -> ast.Block | None:
    """Return a block of whole-number dims (`linear { }`): all of `table`'s keys stated, or none."""
    values = {key: cfg.get(source) for key, source in table.items()}
    stated = {k: v for k, v in values.items() if v is not None}
    if not stated:
        return None
    missing = [table[k] for k, v in values.items() if v is None]
    if missing:
        raise HfImportError(f"the config states {sorted(table[k] for k in stated)} but not "
                            f"{missing}; declare all of {sorted(table.values())}", missing[0])
    return ast.Block(ast.Name(name), tuple(field_item(k, whole(v, table[k], k)) for k, v in stated.items()))


def ssm_block(cfg: Config, facts: Mapping[str, Any], hidden: int, rules: Rules) -> ast.Block | None:
    """Return the ssm block of a state-space (Mamba) config: dims, biases, and the profile's norm fact."""
    ssm = block_fields("ssm")
    mapped = {name: rules.keys(f"ssm.{name}") for name in ssm}
    sources = {name: next((key for key in keys if cfg.get(key) is not None), None)
               for name, keys in mapped.items() if keys}
    if sources.get("ssm_state") is None:
        return None
    values: dict[str, Any] = {}
    for name, source in sources.items():
        field = ssm[name]
        if source is None:
            if field.required:
                raise HfImportError(f"an SSM config ({sources['ssm_state']} set) must state "
                                    f"{mapped[name][0]}", mapped[name][0])
            continue
        value = cfg.get(source)
        if name == "ssm_dt_rank" and value == "auto":
            value = math.ceil(hidden / 16)  # JambaConfig: "auto" is ⌈hidden_size / 16⌉
        values[name] = flag(value, source) if field.type == "bool" else whole(value, source, name)
    _check_head_dim(cfg, values, hidden)
    values.update({k: bool(v) for k, v in facts.items()})
    return ast.Block(ast.Name("ssm"), tuple(field_item(k, v) for k, v in values.items()))


def _check_head_dim(cfg: Config, values: Mapping[str, Any], hidden: int) -> None:
    """Refuse a Mamba-2 head dim that does not split d_inner = ssm_expand × hidden into ssm_heads heads."""
    stated = cfg.get("mamba_d_head")
    if stated is None or stated == "auto" or "ssm_heads" not in values:
        return
    head_dim = whole(stated, "mamba_d_head")
    if head_dim * values["ssm_heads"] != values["ssm_expand"] * hidden:
        raise HfImportError(f"mamba_d_head {head_dim} × mamba_n_heads {values['ssm_heads']} is not "
                            f"mamba_expand × hidden_size = {values['ssm_expand'] * hidden}", "mamba_d_head")


def mla_block(cfg: Config, rules: Rules) -> ast.Block | None:
    """Return the mla block of a config whose kv_lora_rank is set (DeepSeek's multi-head latent attention)."""
    table = stated_keys(cfg, rules, "mla")
    if not table or not cfg.get(table.get("kv_lora_rank", "")):
        return None
    fields = block_fields("mla")
    values = {key: cfg.get(source) for key, source in table.items()}
    values["q_lora_rank"] = values["q_lora_rank"] or 0
    if not values.get("index_n_heads"):  # no DSA indexer: its dims are moot, and left out
        values = {k: v for k, v in values.items() if not k.startswith("index_")}
    missing = [table[k] for k, v in values.items() if v is None and fields[k].required]
    if values.get("index_n_heads"):
        missing += [table[k] for k in ("index_head_dim", "index_topk") if values.get(k) is None]
    values = {k: v for k, v in values.items() if v is not None}
    if missing:
        what = "an MLA config with a DSA indexer (index_n_heads set)" if values.get("index_n_heads") else \
            "an MLA config (kv_lora_rank set)"
        raise HfImportError(f"{what} must state {missing[0]}", missing[0])
    return ast.Block(ast.Name("mla"), tuple(field_item(k, whole(v, table[k], k)) for k, v in values.items()))


__all__ = ["dims_block", "mla_block", "moe_block", "ssm_block", "stated_keys"]
