"""A compiled model and its profile into the bound cost IR: per-layer configs by kind.

Upstream applies a family and then each layer's kind to one shared, mutable
config, and the result depends on the order. Here binding is a pure function:
the *base* config is what the model states after its profile's default kind
(the upstream "snapshot"), and each distinct kind records the complete set of
fields it assigns. Whenever any kind of the stack varies a flavour, every kind
writes that flavour's whole field set (full kinds restore the base values), so
applying kinds in place, in any order, leaves each layer exactly the config a
fresh application gives (docs/reference.md#kind-binding).
"""

from __future__ import annotations

import itertools

from collections.abc import Mapping
from typing import Any

import attrs

from hpdsl.bound.config import LayerConfig
from hpdsl.bound.config import dim_environment
from hpdsl.ir.layouts import evaluate_dim, layout_tally
from hpdsl.ir.nodes import DimIR, FamilyIR, KindIR, ModelIR, ProfileIR, block_stated, evolve
from hpdsl.model.fields import FIELDS

ATTENTION_FIELDS = (
    "attn_kind", "heads", "head_dim", "kv_heads", "output_gate", "attn_extra_params", "qk_norm",
    "key_heads", "key_head_dim", "value_heads", "value_head_dim", "conv", "window", "mixer_macs",
)
"""What an attention flavour assigns (upstream: attn_kind, a, dh, n_kv, attn_output_gate,
attn_extra_p, n_qknorm, lin_n_k, lin_d_k, lin_n_v, lin_d_v, lin_conv)."""

FFN_FIELDS = ("ffn_width", "top_k", "experts", "shared_experts", "shared_width", "shared_gate", "ep", "beside_width")
"""What a feed-forward flavour assigns (upstream: hff, n_chosen_exp, n_exp, n_shared_exp, ep;
plus the shared experts' width and gate, which upstream folds into n_shared_exp). In a bound
layer, `ffn_width` is the width of the layer's feed-forward: the model's `ffn_width` in a dense
layer, its `expert_width` in a MoE layer."""


@attrs.frozen
class CostGroup:
    """Consecutive layers priced alike; kind None prices them on the base config."""

    kind: str | None
    count: int
    mtp: bool = False


@attrs.frozen
class BoundKind:
    """A distinct kind of the stack and the complete set of fields it assigns."""

    name: str
    attention: str
    ffn: str | None
    fields: dict[str, Any]


@attrs.frozen
class CostModel:
    """The bound cost IR of one model: base config, layer groups, bound kinds."""

    model: ModelIR
    profile: ProfileIR
    base: LayerConfig
    groups: tuple[CostGroup, ...]
    kinds: dict[str, BoundKind]
    families: dict[str, FamilyIR] = attrs.field(factory=dict, eq=False, repr=False)
    """The module families in scope: their requires limit the parallel layouts (hpdsl/cost/feasibility/shape.py)."""

    def layer_kinds(self) -> tuple[str | None, ...]:
        """Return the kind of every layer in model order (MTP layers last)."""
        # repeat/chain run in C: a million-layer stack costs milliseconds (bench/bench_search_e2e.py)
        return tuple(itertools.chain.from_iterable(itertools.repeat(g.kind, g.count) for g in self.groups))

    def distinct_kinds(self) -> tuple[str | None, ...]:
        """Return each kind of the stack once, in model order (from the groups: no walk over layers)."""
        return tuple(dict.fromkeys(g.kind for g in self.groups))

    def kind_config(self, kind: str | None) -> LayerConfig:
        """Return the config of a layer of `kind` (None: the base config)."""
        if kind is None:
            return self.base
        return evolve(self.base, **self.kinds[kind].fields)

    def layer_config(self, index: int) -> LayerConfig:
        """Return layer `index`'s full config."""
        total = sum(g.count for g in self.groups)
        if not 0 <= index < total:
            raise IndexError(f"layer {index} is outside the model's {total} layers")
        for group in self.groups:
            if index < group.count:
                return self.kind_config(group.kind)
            index -= group.count
        raise AssertionError("unreachable: index < total")


def bind(model: ModelIR, profile: ProfileIR, *,
         families: Mapping[str, FamilyIR] | None = None) -> CostModel:
    """Bind a compiled model to its profile: base config, layer groups and kind fields.

    With `families` (the registry's), strategies the families' requires refuse are
    invalid to the estimator too, exactly as the torch backend refuses to build them.
    """
    base = base_config(model, profile)
    used = list(dict.fromkeys(g.kind for g in model.groups))
    in_scope = dict(families or {})
    if not _needs_kinds(used, profile):
        groups: tuple[CostGroup, ...] = (CostGroup(None, model.layers + model.mtp),)
        kinds: dict[str, BoundKind] = {}
        if used:
            kinds[used[0]] = _bound_kind(used[0], used, base, model, profile, in_scope)
        return CostModel(model, profile, base, groups, kinds, in_scope)
    groups = tuple(CostGroup(g.kind, g.count, g.mtp) for g in model.groups)
    kinds = {name: _bound_kind(name, used, base, model, profile, in_scope) for name in used}
    return CostModel(model, profile, base, groups, kinds, in_scope)


def base_config(model: ModelIR, profile: ProfileIR) -> LayerConfig:
    """Return the model's config as its profile's default kind leaves it (the snapshot)."""
    default = profile.default or (model.groups[0].kind if model.groups else None)
    ops = dict(profile.kinds[default].ops) if default in profile.kinds else {}
    stated = {name: getattr(model, name) for name in FIELDS if getattr(model, name) is not None}
    mla, moe = block_stated(model, "mla"), block_stated(model, "moe")
    head_dim = model.head_dim or model.hidden // model.heads
    if mla:
        head_dim = model.v_head_dim or profile.v_head_dim or head_dim
    return LayerConfig(**{
        **stated,
        "ops": ops, "attn_kind": "mla" if mla else "full", "head_dim": head_dim, "extra": dict(model.extra),
        "kv_heads": model.kv_heads or model.heads,
        "ffn_width": model.expert_width if moe else (model.ffn_width or 0),
        "beside_width": (model.ffn_width or 0) if moe and model.mlp_beside else 0,
        "experts": model.experts if moe else 1, "top_k": model.top_k if moe else 1,
        "shared_experts": model.shared_experts if moe else 0,
        "shared_width": (model.shared_width or model.expert_width) if moe and model.shared_experts else 0,
        "ep": None if moe else 1, "gated": (model.mlp or "gated") == "gated",
        # Positions come from one place: T5's relative buckets or a learned absolute table (GPT-2, OPT) leave
        # the attention without a rotary embedding (docs/language.md, "The model's outer wiring").
        "rope": not model.position_buckets and not model.learned_positions,
        "embed_width": model.embed_width or model.hidden,
        "wiring": _wiring(model, profile.kinds.get(default or "")),
    })


def _wiring(model: ModelIR, kind: KindIR | None) -> str:
    """Return a layer's wiring: the model's when it states one (as layer_norms beats normOp), else the kind's."""
    if model.wiring is not None:
        return str(model.wiring)
    return kind.wiring if kind is not None and kind.wiring is not None else str(FIELDS["wiring"].default)


def linear_attention_fields(model: ModelIR) -> dict[str, Any]:
    """Return the attention fields of a gated-DeltaNet layer (docs/reference.md#kind-binding).

    The value heads carry the q-side width, the key heads the kv side, the output
    gate is a second q-wide tensor; the short convolution over the projected q, k, v
    stream, the two per-head gate projections, each head's decay and time-step bias
    and the gated output norm's weight are stated apart as extra parameters.
    """
    hidden = model.hidden
    n_k, d_k = model.key_heads, model.key_head_dim
    n_v, d_v = model.value_heads, model.value_head_dim
    kv_heads = n_k * d_k / d_v
    return {
        "attn_kind": "linear", "heads": n_v, "head_dim": d_v,
        "kv_heads": int(kv_heads) if kv_heads.is_integer() else kv_heads,
        "output_gate": True,
        "attn_extra_params": model.conv * (2 * n_k * d_k + n_v * d_v) + 2 * hidden * n_v + 2 * n_v + d_v,
        "qk_norm": False,  # the kernel normalises queries and keys itself, with no weights
    }


def ssm_fields(base: LayerConfig, kind: KindIR, profile: ProfileIR,
               families: Mapping[str, FamilyIR]) -> dict[str, Any]:
    """Return the attention fields of a state-space layer: its mixer priced from its family's layout.

    The family bound to the `ssm` slot (the kind's, else the profile's binding)
    declares every parameter in its `layout { }`; the mixer's parameters are
    their sum and its weight matmuls the per-token multiply-adds of its module
    weights (hpdsl.ir.layouts.layout_tally), both evaluated on this layer's
    dims. No head, no score: nothing here is a formula of any one mixer. Without
    the family (a model bound without its registry) both stay 0, and
    hpdsl/bound/shape.py reports the layer unpriceable.
    """
    fields: dict[str, Any] = {"attn_kind": "ssm", "qk_norm": False, "output_gate": False,
                              "attn_extra_params": 0, "mixer_macs": 0}
    family = families.get((kind.slots or profile.slots).get("ssm", ""))
    tally = None if family is None else layout_tally(family, dim_environment(evolve(base, **fields)))
    if tally is not None:
        fields.update(attn_extra_params=tally.params, mixer_macs=tally.macs)
    return fields


def _ffn_fields(base: LayerConfig, model: ModelIR, flavour: str | None) -> dict[str, Any]:
    if flavour == "dense":
        return {"ffn_width": model.ffn_width or 0, "top_k": 1, "experts": 1, "shared_experts": 0,
                "ep": 1, "shared_width": 0, "shared_gate": False, "beside_width": 0}
    fields = {name: getattr(base, name) for name in FFN_FIELDS}
    if flavour == "moe" and block_stated(model, "moe"):
        fields["ffn_width"] = model.expert_width
    return fields


def _bound_kind(name: str, used: list[str], base: LayerConfig, model: ModelIR,
                profile: ProfileIR, families: Mapping[str, FamilyIR]) -> BoundKind:
    kind = profile.kinds[name]
    fields: dict[str, Any] = {"ops": dict(kind.ops)}
    if any(profile.kinds[k].attention != "full" for k in used):
        if kind.attention == "linear" and block_stated(model, "linear"):
            fields.update(linear_attention_fields(model))
        elif kind.attention == "ssm":
            fields.update({f: getattr(base, f) for f in ATTENTION_FIELDS})
            fields.update(ssm_fields(base, kind, profile, families))
        else:
            fields.update({f: getattr(base, f) for f in ATTENTION_FIELDS})
        if kind.attention == "sliding":
            fields["window"] = model.sliding_window or 0
        if kind.attention == "cross":  # the cross_attention slot (hpdsl/bound/slots.py); heads as the model's
            fields["attn_kind"] = "cross"
    if any(profile.kinds[k].ffn is not None for k in used):
        fields.update(_ffn_fields(base, model, kind.ffn))
    wiring = _wiring(model, kind)
    if wiring != base.wiring:  # the base holds the default kind's (and the model's) wiring
        fields["wiring"] = wiring
    # A field one kind's dims set, every kind writes (the others the base value), as flavours do.
    for field in dict.fromkeys(f for k in used for f in profile.kinds[k].dims):
        fields[field] = getattr(base, field)
    fields.update(kind_dim_values(kind, base))
    return BoundKind(name, kind.attention, kind.ffn, fields)


def kind_dim_values(kind: KindIR, base: LayerConfig) -> dict[str, Any]:
    """Return the fields a kind's `dims { }` set, evaluated on the model's fields (the base config).

    A flag is set where its dims are not 0. A value that is not a whole number of
    at least the field's minimum (1, or 0 for index_n_heads) keeps the model's, and
    hpdsl/bound/shape.py refuses the model.
    """
    env = dim_environment(base)
    values: dict[str, Any] = {}
    for field, expr in kind.dims.items():
        value = evaluate_dim(expr, env)
        if value is None:
            continue
        if FIELDS[field].type == "bool":
            values[field] = value != 0
        elif value.denominator == 1 and value >= _least(field):
            values[field] = int(value)
    return values


def kind_dim_problem(expr: DimIR, base: LayerConfig, field: str) -> str | None:
    """Return why a kind's dims give no value for int field `field` on this model (None: they do)."""
    value = evaluate_dim(expr, dim_environment(base))
    if value is None:
        return f"{expr.text} reads a field the model does not state"
    if value.denominator != 1 or value < _least(field):
        return f"{expr.text} is {value}, not a whole number of at least {_least(field)}"
    return None


def _least(field: str) -> int:
    """Return the least value a kind's dims may give an int field: its declared minimum, else 1."""
    minimum = FIELDS[field].minimum
    return 1 if minimum is None else minimum


def _needs_kinds(used: list[str], profile: ProfileIR) -> bool:
    """Whether the stack's layers differ from the base config (else: one group, no kind)."""
    if len(used) != 1:
        return True
    kind = profile.kinds[used[0]]
    return kind.attention != "full" or kind.ffn is not None or kind.name != profile.default or bool(kind.dims)
