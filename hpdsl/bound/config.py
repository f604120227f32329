"""The bound layer config: every model field plus what binding and building decide, one record.

A `LayerConfig` holds one layer as the estimator prices it and the torch backend
builds it: every field of hpdsl/model/fields.py under its own name (a new field
appears here with no edit), and the BOUND values, which are not stated in a
model but follow from its profile and kind (the op vector, the attention
flavour, the expert-parallel degree, ...) or from the slot a module fills (the
slot's feed-forward width, causality). A module is built from the config of its
slot, so `ModuleConfig` is the same record. A family's layout dims read these
names (DIM_NAMES) and the author fields `extra` holds (the class is made once,
at import, from the standard fields; a profile's or family's own fields ride in
that mapping).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Optional

import attrs

from hpdsl.model.fields import FIELDS, Field


@attrs.frozen
class Bound:
    """A value of the bound config that no model states: its type, default and meaning."""

    name: str
    type: Any
    default: Any
    meaning: str


BOUND: dict[str, Bound] = {b.name: b for b in (
    Bound("ops", dict, None, "the kind's op vector (op name → count)"),
    Bound("attn_kind", str, "full", "the mixer's attention: full, linear, mla, ssm or cross (to a given stream)"),
    Bound("attn_extra_params", int, 0, "linear attention's parameters beside its projections "
                                       "(convolution, gates, decay, output norm); an ssm mixer's all, "
                                       "from its family's layout"),
    Bound("mixer_macs", int, 0, "multiply-adds per token of a layout-priced mixer's weights (every module "
                                "weight of rank ≥ 2 in its family's layout; the ssm flavour)"),
    Bound("ep", Optional[int], 1, "expert-parallel degree: 1 for dense layers, None for the strategy's"),  # noqa: UP007
    Bound("beside_width", int, 0, "the dense MLP's width beside a MoE layer's routed experts (moe's mlp_beside: "
                                  "the model's ffn_width); 0: none"),
    Bound("gated", bool, True, "the feed-forward is gated (gate·up·down) rather than plain (up·down)"),
    Bound("window", int, 0, "positions each query of a sliding-window layer sees (0: the whole prefix)"),
    Bound("q_norm_width", int, 0, "elements the query QK-norm scales: head_dim, or heads × head_dim "
                                  "with qk_norm_full"),
    Bound("k_norm_width", int, 0, "elements the key QK-norm scales: head_dim, or kv_heads × head_dim "
                                  "with qk_norm_full"),
    Bound("value_width", int, 0, "softmax attention's value head dim: value_dim where the model states it, "
                                 "else head_dim (0: head_dim)"),
    Bound("gate_width", int, 0, "a softplus gate's rows per head: head_dim with softplus_gate_wide, else 1 "
                                "(Laguna's g_proj; dim_environment derives it)"),
    Bound("causal", bool, True, "the mixer attends only to earlier positions"),
    Bound("rope", bool, True, "rotary position embeddings (not under relative position buckets or a learned position table)"),
    Bound("extra", dict, None, "the author fields (declared in a profile or family) and their values"),
)}
"""What binding and building add to the model's fields."""


def _layer_default(field: Field) -> Any:
    """Return what a config holds for a field nobody set: its table default, else false or 0.

    A count that may legally be 0 but has no default (`layer_norms`) stays None:
    there, absent and 0 mean different things.
    """
    if field.default is not None:
        return field.default
    if field.type == "int" and field.minimum == 0:
        return None
    return {"bool": False, "float": 0.0, "string": "", "choice": ""}.get(field.type, 0)


def _attribute(field: Field) -> Any:
    kind = {"int": int, "float": float, "bool": bool}.get(field.type, str)
    return attrs.field(default=_layer_default(field), type=kind)


class _Derived:
    """What a layer config computes from its values."""

    __slots__ = ()

    @property
    def q_head_dim(self) -> int:
        """Return MLA's query/key head dim (no-position part plus rotary part)."""
        values: Any = self
        return int((values.nope_dim or values.head_dim) + values.rope_dim)

    @property
    def chunk(self) -> int:
        """Return the positions a chunked self-attention attends within: its rotary layers' attention_chunk (Llama 4)."""
        values: Any = self
        rotary = values.attn_kind == "full" and values.rope and not values.no_rope
        return int(values.attention_chunk) if values.attention_chunk and rotary else 0


if TYPE_CHECKING:
    class LayerConfig(_Derived):
        """One layer's config: every model field and every BOUND value, by name."""

        hidden: int
        ops: dict[str, int]
        __attrs_attrs__: ClassVar[tuple[attrs.Attribute[Any], ...]]

        def __init__(self, **values: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...
else:
    LayerConfig = attrs.make_class("LayerConfig", {
        "hidden": attrs.field(type=int, kw_only=True),
        **{name: _attribute(field) for name, field in FIELDS.items() if name != "hidden"},
        **{b.name: attrs.field(default=b.default, type=b.type, kw_only=True) if b.type is not dict
           else attrs.field(factory=dict, type=dict, kw_only=True) for b in BOUND.values()},
    }, bases=(_Derived,), frozen=True, slots=True, kw_only=True)
    LayerConfig.__doc__ = "One layer's config: every model field and every BOUND value, by name."

ModuleConfig = LayerConfig
"""What a module is built from: the config of the slot it fills (one record with LayerConfig)."""

DIM_NAMES: tuple[str, ...] = (
    *(name for name, field in FIELDS.items() if field.type in ("int", "bool")),
    *(b.name for b in BOUND.values() if b.type in (int, bool)),
)
"""The config names a layout's dims and entry conditions may read: ints as they are, flags as 1 (set) or 0."""

FLAG_NAMES: frozenset[str] = frozenset((
    *(name for name, field in FIELDS.items() if field.type == "bool"),
    *(b.name for b in BOUND.values() if b.type is bool),
))
"""The DIM_NAMES that are flags: what a layout entry's `if` may name alone (the rest compare as ints)."""


def dim_environment(config: object) -> dict[str, int]:
    """Return the DIM_NAMES values `config` has (a LayerConfig or any object with those attributes).

    The author fields it holds in `extra` (int or bool ones) are dims too: a
    layout may read them by name (hpdsl/check/layouts.py allows the declared ones).
    Flags stay bools (an int to a dims expression, a truth value to an entry's `if`).
    """
    env: dict[str, int] = {}
    values = [(name, getattr(config, name, None)) for name in DIM_NAMES]
    extra = getattr(config, "extra", None)
    for name, value in [*(extra.items() if isinstance(extra, dict) else ()), *values]:
        if isinstance(value, int):
            env[name] = value
    if not env.get("embed_width") and "hidden" in env:  # unset: the token table is hidden wide
        env["embed_width"] = env["hidden"]
    if not env.get("value_width") and "head_dim" in env:  # a config built without layer_config: head_dim wide
        env["value_width"] = env["head_dim"]
    env["gate_width"] = env.get("head_dim", 1) if env.get("softplus_gate_wide") else 1
    heads, inner = env.get("ssm_heads"), env.get("ssm_expand", 0) * env.get("hidden", 0)
    if not env.get("ssm_head_dim") and heads and inner and inner % heads == 0:  # unset: d_inner = ssm_expand × hidden
        env["ssm_head_dim"] = inner // heads
    return env


__all__ = ["BOUND", "DIM_NAMES", "FLAG_NAMES", "Bound", "LayerConfig", "ModuleConfig", "dim_environment"]
