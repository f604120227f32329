"""Why a bound model cannot be built: every rule the torch backend holds a model to, as data.

A built layer (hpdsl/torch/model.py, hpdsl/torch/layers.py) is a mixer, a
cross-attention in an encoder-decoder's decoder, and a feed-forward block, each
behind its own norm; the reference modules (hpdsl/torch/modules/) refuse shapes
they cannot hold. `layer_problems` states all of it for a bound model: the
checker reports each problem at compile time (hpdsl/check/shapes.py) and the
backend raises BuildError from the very same list, so a spec that compiles is a
spec that builds, and the estimator never prices a layer that is not built.
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction


from hpdsl.bound import wiring
from hpdsl.bound.bind import CostModel, kind_dim_problem
from hpdsl.bound.config import DIM_NAMES, LayerConfig, dim_environment
from hpdsl.bound.outer import outer_problems
from hpdsl.bound.problem import LayerProblem
from hpdsl.bound.slots import (Slot, buildable, crosses, end_slots, kind_bindings, layer_shape, layer_slots,
                               mixer_role, mtp_slots)
from hpdsl.bound.tally import WHOLE_AXES, priced_variant
from hpdsl.ir.layouts import dim_names, entry_numel, entry_present, layout_for, render_dims
from hpdsl.ir.nodes import ModelIR, block_stated
from hpdsl.model import ops
from hpdsl.model.fields import BLOCKS, FIELDS, required
from hpdsl.model.layouts import LAYOUT_AXES

ENCODER, DECODER = "encoder", "decoder"
"""The kinds whose layers make an encoder-decoder: two towers, the decoder's layers with cross-attention."""

MATRICES = {"gated": 3, "plain": 2}
"""The feed-forward matrices of each `mlp` form."""


def layer_problems(cost: CostModel) -> tuple[LayerProblem, ...]:
    """Return every reason the backend refuses to build `cost`'s model (empty: it builds as priced)."""
    model = cost.model
    found = [*_field_problems(model), *outer_problems(model, encoder_decoder=is_encoder_decoder(model)),
             *_stack_problems(cost)]
    for kind in built_kinds(cost):
        found.extend(_kind_problems(cost, kind))
    found.extend(_pricing_problems(cost))
    return tuple(dict.fromkeys(found))


def is_encoder_decoder(model: ModelIR) -> bool:
    """Return whether the backend builds `model` as an encoder-decoder (its groups hold both towers' kinds)."""
    return {ENCODER, DECODER} <= {group.kind for group in model.groups}


def built_kinds(cost: CostModel) -> tuple[str, ...]:
    """Return the kinds whose layers the backend builds: both towers' kinds, else every kind in stack order."""
    if is_encoder_decoder(cost.model):
        return (ENCODER, DECODER)
    return tuple(dict.fromkeys(group.kind for group in cost.model.groups))


def kind_layer(cost: CostModel, kind: str) -> LayerConfig:
    """Return the config a layer of `kind` is built from (the base config where the kind changes nothing)."""
    return cost.kind_config(kind if kind in cost.kinds else None)


# --------------------------------------------------------------------------
# The model's own fields
# --------------------------------------------------------------------------


def _field_problems(model: ModelIR) -> Iterator[LayerProblem]:
    """Yield fields below their minimum and blocks lacking a field the modules need."""
    for name, field in FIELDS.items():
        value = getattr(model, name)
        if field.minimum is not None and isinstance(value, int) and value < field.minimum:
            yield LayerProblem("non-positive-field", f"'{name}' must be at least {field.minimum}, found {value}",
                               f"'{name}' is the {field.meaning}", field=name)
    if model.head_dim is None and not block_stated(model, "mla") and 0 < model.hidden < model.heads:
        # head_dim defaults to hidden // heads (hpdsl/bound/bind.py): here 0, and every attention layout is empty
        yield LayerProblem("non-positive-field", f"'head_dim' must be at least 1, found hidden {model.hidden} // "
                           f"heads {model.heads} = 0 (head_dim is not stated)",
                           "state head_dim, or give hidden at least one dim per head", field="heads")
    yield from _rotary_problems(model)
    yield from _modifier_problems(model)
    for block in BLOCKS:
        missing = [name for name in required(block) if getattr(model, name) is None]
        if block_stated(model, block) and missing:
            yield LayerProblem("incomplete-block", f"the {block} block lacks {_quoted(missing)}",
                               f"a {block} block states {_quoted(required(block))}", field=block)


def _rotary_problems(model: ModelIR) -> Iterator[LayerProblem]:
    """Yield a rotary fraction that turns no dims, more than a head, or an odd count (rotation turns pairs)."""
    fraction = model.rotary_fraction
    if fraction is None or fraction == 1:
        return
    head_dim = model.head_dim or model.hidden // model.heads
    dims = int(head_dim * fraction)
    if 0 < fraction <= 1 and dims > 0 and dims % 2 == 0:
        return
    yield LayerProblem("rotary-dims",
                       f"rotary_fraction {fraction} of head_dim {head_dim} turns ⌊{head_dim} × {fraction}⌋ = "
                       f"{dims} dims of each head, but a rotary embedding turns a positive, even number of them, "
                       "at most the head dim",
                       f"state a rotary_fraction in (0, 1] whose share of {head_dim} is even, e.g. "
                       f"`rotary_fraction {_even_share(head_dim)}`", field="rotary_fraction")


MODIFIERS = ("attn_softcap", "final_softcap")
"""The soft-caps (docs/language.md#attention-modifiers): 0 is none, a negative value is no cap."""


def _modifier_problems(model: ModelIR) -> Iterator[LayerProblem]:
    """Yield a negative soft-cap (c·tanh(x / c) needs c > 0; 0 turns it off; attn_scale_dim is an int >= 0)."""
    for name in MODIFIERS:
        value = getattr(model, name)
        if value is not None and value < 0:
            yield LayerProblem("non-positive-field", f"'{name}' must be at least 0, found {value}",
                               f"'{name}' is the {FIELDS[name].meaning}; state a positive value, or 0 for none",
                               field=name)


def _even_share(head_dim: int) -> str:
    return "0.5" if head_dim % 4 == 0 else "1.0"


def _stack_problems(cost: CostModel) -> Iterator[LayerProblem]:
    """Yield layers an encoder-decoder has but the backend's two towers do not hold."""
    model = cost.model
    if not is_encoder_decoder(model):
        return
    others = sorted({g.kind for g in model.groups if not g.mtp} - {ENCODER, DECODER})
    if others:
        yield LayerProblem("encoder-decoder-stack",
                           f"model '{model.name}' is an encoder-decoder, but its stack also has layers of "
                           f"kind {_quoted(others)}, which neither tower holds",
                           "an encoder-decoder's stack holds only encoder and decoder layers", field="stack")
    if any(g.mtp for g in model.groups):
        yield LayerProblem("encoder-decoder-stack",
                           f"model '{model.name}' is an encoder-decoder with mtp {model.mtp}, but an "
                           "encoder-decoder has no multi-token-prediction layers",
                           "remove `mtp`, or write `mtp 0`", field="mtp")


# --------------------------------------------------------------------------
# One kind's layers
# --------------------------------------------------------------------------


def _kind_problems(cost: CostModel, kind: str) -> Iterator[LayerProblem]:
    layer = kind_layer(cost, kind)
    yield from _kind_dims(cost, kind)
    attentions, matrices = layer_shape(layer)
    yield from _attention_count(cost, kind, layer, attentions)
    yield from _ffn_count(cost.model, kind, layer, matrices)
    if buildable(attentions, matrices):
        yield from _norm_count(kind, layer, int(attentions), matrices > 0, crosses(layer))
    yield from _flavour_blocks(cost, kind)
    yield from _module_shapes(layer, attentions)


def _kind_dims(cost: CostModel, kind: str) -> Iterator[LayerProblem]:
    """Yield a kind's dims that give an int field no whole value of at least its minimum on this model."""
    declared = cost.profile.kinds.get(kind)
    for field, expr in (declared.dims if declared is not None else {}).items():
        why = None if FIELDS[field].type == "bool" else kind_dim_problem(expr, cost.base, field)
        if why is not None:
            yield LayerProblem("non-positive-field",
                               f"kind '{kind}' sets {field} = {why} on model '{cost.model.name}'",
                               f"'{field}' is the {FIELDS[field].meaning}: write dims that give it a whole "
                               "number of at least 1, or state the fields they read", kind=kind, field=field)


def _attention_count(cost: CostModel, kind: str, layer: LayerConfig, attentions: Fraction) -> Iterator[LayerProblem]:
    """Yield an attention count no layer holds, and two attentions outside an encoder-decoder's decoder."""
    count = ops.count(layer.ops, ops.ATT_MM)
    if attentions == 0 and ops.ffn_matrices(layer.ops) == 0:
        yield LayerProblem("layer-attentions",
                           f"kind '{kind}' prices attMM 0 and ffMM 0: a layer with neither a mixer nor a "
                           "feed-forward", "count attMM 4 for its mixer or ffMM 2/3 for its feed-forward",
                           kind=kind, op=ops.ATT_MM)
    elif attentions not in (0, 1, 2):
        yield LayerProblem("layer-attentions",
                           f"kind '{kind}' prices attMM {count} ({_number(attentions)} attentions per layer), "
                           "but a layer holds one attention (attMM 4), self- and cross-attention (attMM 8) "
                           "or, feed-forward only, none (attMM 0)",
                           "count attMM 4 per attention: 4, 8 in an encoder-decoder's decoder, 0 in a "
                           "feed-forward-only layer", kind=kind, op=ops.ATT_MM)
    elif attentions == 2 and not (kind == DECODER and is_encoder_decoder(cost.model)):
        model = cost.model
        why = (f"but its '{kind}' layers are not the decoder's" if is_encoder_decoder(model)
               else f"but model '{model.name}' is not an encoder-decoder (its stack has no "
                    f"{'encoder' if kind == DECODER else 'encoder and decoder'} layers)")
        yield LayerProblem("cross-attention-outside-decoder",
                           f"kind '{kind}' prices two attentions (attMM 8), self- and cross-attention, which "
                           f"only an encoder-decoder's decoder layers hold, {why}",
                           "give the model encoder and decoder layers (`stack [encoder * N, decoder * N]`), "
                           "or use a kind that prices one attention (attMM 4)",
                           kind=kind, field="stack", op=ops.ATT_MM)


def _ffn_count(model: ModelIR, kind: str, layer: LayerConfig, matrices: int) -> Iterator[LayerProblem]:
    """Yield a feed-forward count no block has, and one the model's `mlp` form disagrees with."""
    if matrices not in (0, 2, 3):
        yield LayerProblem("ffn-matrices",
                           f"kind '{kind}' prices ffMM {matrices}, but a feed-forward block has 3 matrices "
                           "(gated), 2 (plain) or none (ffMM 0)",
                           "count ffMM 3 for a gated MLP, 2 for a plain one, 0 for a layer without one",
                           kind=kind, op=ops.FF_MM)
        return
    stated = MATRICES.get(model.mlp or "")
    if stated is not None and matrices and stated != matrices:
        form = next(name for name, count in MATRICES.items() if count == matrices)
        yield LayerProblem("mlp-form-mismatch",
                           f"model '{model.name}' states `mlp {model.mlp}` ({stated} matrices), but its "
                           f"'{kind}' layers price ffMM {matrices}, a {form} feed-forward",
                           f"write `mlp {form}`, or price the model with a profile whose kinds count "
                           f"ffMM {stated}", kind=kind, field="mlp", op=ops.FF_MM)
    if matrices and layer.ffn_width < 1:
        yield LayerProblem("missing-field",
                           f"layers of kind '{kind}' run a dense feed-forward, but the model states no ffn_width",
                           "state the dense width: `ffn_width 11008` (HF intermediate_size)",
                           kind=kind, field="ffn_width")


def _norm_count(kind: str, layer: LayerConfig, attentions: int, ffn: bool, cross: bool) -> Iterator[LayerProblem]:
    """Yield a wiring the layer's blocks cannot have, and a norm count other than the one its wiring holds."""
    if layer.wiring in wiring.PARALLEL and not wiring.parallel_fits(attentions, ffn, cross=cross):
        held = {0: "no attention", 1: "one attention", 2: "two attentions"}[attentions]
        yield LayerProblem("wiring-mismatch",
                           f"'{kind}' layers are wired {layer.wiring} (the attention and feed-forward side by "
                           f"side), but they hold {held}{' and a feed-forward' if ffn else ' and no feed-forward'}",
                           "wire them in sequence (`wiring pre_norm`), or price one attention and a "
                           "feed-forward (attMM 4, ffMM 2 or 3)", kind=kind, field="wiring")
        return
    expected = len(wiring.norm_paths(layer.wiring, attentions, ffn, cross=cross))
    stated = layer.layer_norms is not None
    count = layer.layer_norms if stated else ops.norms(layer.ops)
    if count == expected:
        return
    where = f"layer_norms {count}" if stated else f"normOp {count}"
    yield LayerProblem("norm-count-mismatch",
                       f"'{kind}' layers price {count} norms ({where}), but such a layer has {expected}: "
                       f"{wiring.describe(layer.wiring, attentions, ffn, cross=cross)}",
                       _norm_hint(layer, count, expected, attentions, ffn, cross), kind=kind, field="layer_norms",
                       op=None if stated else ops.NORM)


def _norm_hint(layer: LayerConfig, count: int, expected: int, attentions: int, ffn: bool, cross: bool) -> str:
    """Return the fix of a norm count: the wiring that holds that many norms, else the count to state."""
    # gated places pre_norm's norms and adds gates: never the fix of a norm count
    others = [w for w in wiring.wiring_for_count(count, attentions, ffn, cross=cross)
              if w not in (layer.wiring, "gated")]
    rewire = (f"if the layers are wired otherwise, state it: {' or '.join(f'`wiring {w}`' for w in others)} "
              "in the kind (or the model); else " if others else "")
    if layer.layer_norms is not None:
        return (f"{rewire}remove `layer_norms` to price the kinds' normOp, or state `layer_norms {expected}` "
                f"if every layer has {expected}")
    return f"{rewire}state `layer_norms {expected}`: the norms a layer has, where the kind's normOp counts others"


def _flavour_blocks(cost: CostModel, kind: str) -> Iterator[LayerProblem]:
    """Yield a kind whose attention or feed-forward flavour needs a block the model does not state."""
    flavours = cost.profile.kinds.get(kind)
    if flavours is None:
        return
    model = cost.model
    if flavours.attention == "linear" and not block_stated(model, "linear"):
        yield LayerProblem("missing-linear-dims",
                           f"kind '{kind}' is linear attention, but model '{model.name}' declares no linear block",
                           "declare `linear { key_heads  key_head_dim  value_heads  value_head_dim  conv }`",
                           kind=kind, field="linear")
    if flavours.attention == "ssm" and not block_stated(model, "ssm"):
        yield LayerProblem("missing-field",
                           f"kind '{kind}' is a state-space mixer, but model '{model.name}' declares no ssm block",
                           "declare `ssm { ssm_state  ssm_conv  ssm_expand  ssm_dt_rank }`", kind=kind, field="ssm")
    elif flavours.attention == "ssm" and cost.families:
        yield from _ssm_layout(cost, kind)
    if flavours.attention == "cross" and ops.attentions(kind_layer(cost, kind).ops) == 2:
        yield LayerProblem("layer-attentions",
                           f"kind '{kind}' is a cross-attention layer (`attention cross`), whose one attention "
                           "reads a given stream, but it prices two attentions (attMM 8)",
                           "count attMM 4: the cross-attention's q, k, v and o projections", kind=kind, op=ops.ATT_MM)
    if flavours.ffn == "moe" and not block_stated(model, "moe"):
        yield LayerProblem("missing-moe-dims",
                           f"kind '{kind}' is MoE, but model '{model.name}' declares no moe block",
                           "declare `moe { experts E  top_k K  expert_width W }`", kind=kind, field="moe")


def _ssm_layout(cost: CostModel, kind: str) -> Iterator[LayerProblem]:
    """Yield an ssm kind whose family layout cannot price it: no layout, or a dim it reads left unstated."""
    model = cost.model
    family = cost.families.get((cost.profile.kinds[kind].slots or cost.profile.slots).get("ssm", ""))
    if family is None or not family.layout:
        yield LayerProblem("missing-field",
                           f"kind '{kind}' is a state-space mixer, but the family bound to its ssm slot has no "
                           f"layout that prices it on model '{model.name}'",
                           "bind `ssm` to a family with a `layout { }` (families/mamba.hpf)", kind=kind, field="ssm")
        return
    read = sorted({name for entry in family.layout for dim in entry.dims for name in dim_names(dim)})
    env = dim_environment(kind_layer(cost, kind))  # a derived dim (head_dim) is stated by its config
    unstated = [name for name in read if name in FIELDS and FIELDS[name].type == "int" and _unknown(name, env)]
    # An author field (a profile's or family's) the model neither states nor has a default for.
    unstated += [name for name in read if name not in FIELDS and name not in DIM_NAMES
                 and name not in LAYOUT_AXES and name not in env]
    if unstated:
        yield LayerProblem("missing-field",
                           f"kind '{kind}' is built by family '{family.name}', whose layout reads "
                           f"{', '.join(unstated)}, which model '{model.name}' does not state",
                           f"state `{unstated[0]}` in the model" + ("'s ssm block" if unstated[0] in FIELDS else ""),
                           kind=kind, field=unstated[0])
    if "ssm_state" in read and model.ssm_state == 0:  # 0 is a stateless mixer's (families/short_conv.hpf)
        yield LayerProblem("missing-field",
                           f"kind '{kind}' is built by family '{family.name}', whose layout reads a state of "
                           f"ssm_state per channel, but model '{model.name}' states ssm_state 0 (no state)",
                           "state `ssm_state N` with N ≥ 1, or bind `ssm` to a stateless family "
                           "(families/short_conv.hpf)", kind=kind, field="ssm_state")


def _pricing_problems(cost: CostModel) -> Iterator[LayerProblem]:
    """Yield every slot whose family's layout cannot price it: no layout, or an entry unknown on the model's dims.

    The estimator prices each slot from its family's layout (hpdsl/cost/facts/params.py),
    so a slot it cannot derive is refused here rather than priced 0. Without
    families (a model bound without its registry) nothing is judged; an ssm
    slot is judged by `_ssm_layout`, a binding to a family not in scope by
    hpdsl/check/slots.py.
    """
    if not cost.families:
        return
    seen: set[tuple[str | None, str]] = set()
    uses = [(kind, slot) for kind in built_kinds(cost)
            for slot in layer_slots(kind_layer(cost, kind), kind_bindings(cost, kind))]
    for kind, slot in [*uses, *((None, s) for s in (*end_slots(cost), *mtp_slots(cost)))]:
        if slot.role != "ssm" and (kind, slot.role) not in seen and (slot.family in cost.families or not slot.family):
            seen.add((kind, slot.role))
            yield from _slot_pricing(cost, kind, slot) if slot.family else _unbound(cost, kind, slot)


def _unbound(cost: CostModel, kind: str | None, slot: Slot) -> Iterator[LayerProblem]:
    """Yield a slot a layer builds that no family fills (a model's `wiring gated` under a profile binding no gate)."""
    where = f"the {slot.role} slot of kind '{kind}'" if kind else f"model '{cost.model.name}''s {slot.role} slot"
    yield LayerProblem("unpriced-slot", f"{where} ({slot.path}) is bound to no family, so nothing builds or prices it",
                       f"bind it in a `slots {{ ... }}` block, e.g. `slots {{ {slot.role} FAMILY }}` (the standard "
                       "library binds every slot: profiles/slots.hpf)", kind=kind)


def _slot_pricing(cost: CostModel, kind: str | None, slot: Slot) -> Iterator[LayerProblem]:
    family = cost.families[slot.family]
    where = f"the {slot.role} slot of kind '{kind}'" if kind else f"model '{cost.model.name}''s {slot.role} slot"
    if not family.layout:
        yield LayerProblem("unpriced-slot",
                           f"{where} is bound to family '{family.name}', which declares no layout, so the "
                           "estimator cannot price its parameters",
                           f"give family '{family.name}' a `layout {{ }}` with an entry for every parameter its "
                           "module creates (docs/language.md, \"Layouts\")", kind=kind)
        return
    env = {**dim_environment(slot.config), **WHOLE_AXES}
    for path, entry in layout_for(family, priced_variant(family, slot.config)).items():
        numel = entry_numel(entry, env)
        read = sorted(name for d in entry.dims for name in dim_names(d) if _unknown(name, env))
        if numel is None or (numel == 0 and read and entry_present(entry, env)):
            why = f"it reads {_quoted(read)}, which the model does not state" if read else \
                "its size is not a whole number"
            yield LayerProblem("unpriced-slot",
                               f"{where} is bound to family '{family.name}', whose layout entry '{path}' "
                               f"{render_dims(entry.dims)} the estimator cannot evaluate on model "
                               f"'{cost.model.name}': {why}",
                               "state the dims it reads in the model, or write the entry over names the slot "
                               "config has (hpdsl/bound/config.py DIM_NAMES)", kind=kind)
            return


def _unknown(name: str, env: dict[str, int]) -> bool:
    """Whether a dim the config holds is unstated: absent, or 0 where its field must be positive."""
    field = FIELDS.get(name)
    return name not in env or (env[name] == 0 and field is not None and (field.minimum or 0) >= 1)


def _module_shapes(layer: LayerConfig, attentions: Fraction) -> Iterator[LayerProblem]:
    """Yield what the reference modules' constructors refuse (hpdsl/torch/modules/)."""
    role = mixer_role(layer)
    if role in ("attention", "mla", "cross_attention") or attentions == 2:
        if layer.kv_heads < 1 or layer.heads % layer.kv_heads:
            yield LayerProblem("heads-not-divisible",
                               f"heads {layer.heads} is not a multiple of kv_heads {layer.kv_heads}",
                               "kv_heads must divide heads: one of " + ", ".join(map(str, _divisors(layer.heads))),
                               field="kv_heads")
    if role == "attention" and layer.output_gate and layer.value_dim and layer.value_dim != layer.head_dim:
        yield LayerProblem("missing-field",
                           f"the attention's output gate is head_dim {layer.head_dim} wide per head, but its "
                           f"value heads are value_dim {layer.value_dim} wide: the reference module gates values "
                           "as wide as the queries", "remove `value_dim` (or state it equal to head_dim), or "
                           "the output gate", field="value_dim")
    if role == "linear_attention" and layer.key_heads >= 1 and layer.value_heads % layer.key_heads:
        yield LayerProblem("value-heads-not-divisible",
                           f"linear value_heads {layer.value_heads} is not a multiple of key_heads "
                           f"{layer.key_heads}: each key head serves a whole number of value heads",
                           "value_heads must be a multiple of key_heads: "
                           + ", ".join(str(layer.key_heads * n) for n in range(1, 5)) + ", ...",
                           field="value_heads")
    if role == "mla" and layer.qk_norm:
        yield LayerProblem("mla-qk-norm",
                           "the model has an mla block and states qk_norm, but multi-head latent attention "
                           "normalises its latents and has no per-head QK norm",
                           "remove `qk_norm` (or write `qk_norm false`)", field="qk_norm")
    if role == "mla" and layer.index_n_heads:
        yield from _indexer_shapes(layer)


def _indexer_shapes(layer: LayerConfig) -> Iterator[LayerProblem]:
    """Yield what a DSA indexer cannot be built from: no query latent to read, a head narrower than its rotary part."""
    if not layer.q_lora_rank:
        yield LayerProblem("mla-indexer",
                           f"the mla block has a DSA indexer (index_n_heads {layer.index_n_heads}) but no query "
                           "latent (q_lora_rank 0): the indexer's queries are projected from the query latent",
                           "state `q_lora_rank` in the mla block, or remove `index_n_heads`", field="q_lora_rank")
    if layer.index_head_dim and layer.index_head_dim < layer.rope_dim:
        yield LayerProblem("mla-indexer",
                           f"the DSA indexer's head dim {layer.index_head_dim} is below rope_dim {layer.rope_dim}: "
                           "its first rope_dim dims are rotary",
                           f"make `index_head_dim` at least {layer.rope_dim}", field="index_head_dim")


def _divisors(n: int, most: int = 12) -> list[int]:
    """Return the least `most` divisors of n, trying at most 10,000 candidates."""
    return [d for d in range(1, min(n, 10_000) + 1) if n % d == 0][:most]


def _quoted(names: list[str] | tuple[str, ...]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


__all__ = ["ENCODER", "DECODER", "MATRICES", "LayerProblem", "built_kinds", "is_encoder_decoder", "kind_layer",
           "layer_problems"]
