"""Family `cost { }` blocks into diagnostics: units, term names, the names an expression reads, linearity in keys.

Each term is judged on its own (docs/language.md, "Cost terms"): its unit is one
of hpdsl/model/cost_terms.py UNITS, its name one of TERMS, its expression
reads only slot-config names (DIM_NAMES, the float fields, the author fields
declared), cp, ep, pp and `keys`, and is linear in `keys` (no `keys` in a
divisor, none times another); `recompute` names `selective`; its `if` reads as a
layout entry's does (hpdsl/check/layouts.py). A `saved` term's byte class is one
of BYTE_CLASSES, and its keys, recompute and flash clause agree (`_check_saved`);
only a saved term says `sequence`, `routed`, `at` or a flash clause, and `routed` is
kept at the compute dtype, no flash clause; `ffn` and `ffAct` are saved terms only.
Where a kind fills its mixer or feed-forward slots (NEEDS_SAVED: no activation
formula of the estimator's prices them) from a family declaring no `saved` term,
the binding is warned of: its module's saved tensors would price zero. A binding
no kind uses (a mixer in a kind with attMM 0, a feed-forward with ffMM 0) is not.
"""

from __future__ import annotations

from hpdsl import ast
from hpdsl.bound.config import DIM_NAMES
from hpdsl.check.coverage import family_items
from hpdsl.check.layouts import _check_condition_name, _condition_names
from hpdsl.model.cost_terms import (BYTE_CLASSES, CHOICE_NAMES, EAGER, EAGER_TERMS, FIXED_BYTES, FLOAT_NAMES, KEYS, SAVED,
                                    SAVED_ONLY, TERMS, UNITS, keys_degree)
from hpdsl.diagnostics import Collector, did_you_mean
from hpdsl.diagnostics.span import Span
from hpdsl.ir.layouts import dim_from_ast
from hpdsl.ir.lower_fields import declared_dim_names
from hpdsl.model.fields import FIELDS
from hpdsl.model.layouts import LAYOUT_AXES
from hpdsl.scope import Scope, kind_flavours, kind_slots, kind_vector, profile_kinds, profile_slots

NEEDS_SAVED = {"ssm": "scan", "linear_attention": "linrec", "attention": "mixer", "mla": "mixer",
               "cross_attention": "mixer", "mlp": "ffn", "router": "ffn", "experts": "ffn", "shared_experts": "ffn"}
"""Mixer and feed-forward slots whose saved activations only their family's `saved` terms price, and the term each
would name (families/attention.hpf, mlp.hpf, ...). A MoE block's shared_gate and latent_proj keep a tensor only
beside the router's and experts' (families/router.hpf), so a family there with none is not warned of."""

FLAVOUR_SLOTS = {"ssm": ("ssm",), "linear": ("linear_attention",), "full": ("attention",),
                 "sliding": ("attention",), "cross": ("cross_attention",)}
"""The mixer slot a kind of each attention flavour fills (hpdsl/model/slots.py ATTENTION_FLAVOURS). Full attention
fills the mla slot instead where the model has an `mla` block, which a profile does not know: not warned of."""

FFN_SLOTS = {"dense": ("mlp",), "moe": ("router", "experts", "shared_experts")}
"""The feed-forward slots NEEDS_SAVED names that a kind of each ffn flavour fills (hpdsl/model/slots.py FFN_FLAVOURS).
A kind stating none fills the model's own, the mlp slot unless the model has a `moe` block: mlp is warned of."""


def check_cost_terms(scope: Scope, collector: Collector) -> None:
    """Report every problem with the cost terms of the families in scope, and mixers bound with no saved terms."""
    declared = declared_dim_names(scope)
    for file in scope.files:
        for item in file.items:
            if isinstance(item, ast.Family):
                for block in family_items(item, ast.CostBlock):
                    for term in block.terms:
                        check_cost_term(term, collector, declared)
    for binding in _used_bindings(scope):
        _check_saved_binding(binding, scope, collector)


def check_cost_term(term: ast.CostTerm, collector: Collector, declared: frozenset[str]) -> None:
    """Report every problem with one cost term."""
    if term.unit.value not in UNITS:
        collector.error(term.unit.span, "unknown-cost-unit",
                        f"'{term.unit.value}' is not a cost term's unit; expected {', '.join(UNITS)}",
                        hint=did_you_mean(term.unit.value, UNITS) or "write `flops NAME = ...` (forward FLOPs per "
                        "token) or `saved NAME = ...` (elements per token kept for the backward)")
    names = EAGER_TERMS if term.unit.value == EAGER else TERMS
    if term.name.value not in names:
        collector.error(term.name.span, "unknown-cost-term",
                        f"'{term.name.value}' is not a term the estimator prices; expected one of {', '.join(names)}",
                        hint=did_you_mean(term.name.value, names) or
                        "name the term the work belongs to (docs/cost-model.md, \"Cost terms from the families\")")
    readable = (*DIM_NAMES, *FLOAT_NAMES, *LAYOUT_AXES, *declared, KEYS)
    for ref in ast.dim_names(term.expr):
        if ref.value not in readable:
            collector.error(ref.span, "unknown-dim-field",
                            f"the cost term '{term.name.value}' reads '{ref.value}', which is neither a field of the "
                            "slot config a module is built from, nor a declared field, nor cp, ep, pp or keys",
                            hint=did_you_mean(ref.value, readable) or
                            f"declare it in the profile or family: `field {ref.value}: int >= 1 \"what it is\"`")
    if keys_degree(dim_from_ast(term.expr)) not in (0, 1):
        collector.error(term.expr.span, "nonlinear-cost-term",
                        f"the cost term '{term.name.value}' is not linear in `keys`: found `keys` in a divisor or "
                        "multiplied by itself, expected FLOPs per token plus FLOPs per token and key",
                        hint="write it as `A + B * keys`, with no `keys` in A, B or a divisor")
    if term.recompute is not None and term.recompute.value != "selective":
        collector.error(term.recompute.span, "unknown-recompute",
                        f"'{term.recompute.value}' is not what a cost term's `recompute` names; expected selective",
                        hint="write `recompute selective` (full recompute reruns every term anyway), or remove it")
    if term.condition is not None:
        _check_choices(term.condition, collector)
        for ref, alone in _condition_names(term.condition):
            if ref.value in CHOICE_NAMES and not alone:
                continue  # `if norm == layernorm`: a choice field compared to one of its choices
            if ref.value not in FLOAT_NAMES:
                _check_condition_name(ref, alone, collector, declared)
    if term.unit.value == SAVED:
        _check_saved(term, collector)
    elif term.unit.value == EAGER:
        _check_eager(term, collector)
    elif term.unit.value in UNITS:
        _check_flops_only(term, collector)
        if term.name.value in SAVED_ONLY:
            collector.error(term.name.span, "saved-only-term",
                            f"'{term.name.value}' names what a feed-forward keeps for the backward, not FLOPs: its "
                            "FLOPs are its layout's matmuls and the kind's ffAct count (docs/cost-model.md)",
                            hint=f"write `saved {term.name.value} = ...`, or remove the term")


def _check_saved(term: ast.CostTerm, collector: Collector) -> None:
    """Report what a `saved` term may not say: an unknown byte class, or a kernel, keys and recompute that disagree.

    A term with neither flash clause is per token and kept under selective recompute; `without flash` is a
    score tensor, per token and key, which selective recompute drops; `with flash` a flash kernel's per-token
    statistics at a fixed width, dropped too (hpdsl/cost/formulas/saved.py prices exactly these).
    """
    name, kept = term.name.value, term.bytes.value if term.bytes is not None else "compute"
    if term.bytes is not None and kept not in BYTE_CLASSES:
        collector.error(term.bytes.span, "unknown-saved-bytes",
                        f"'{kept}' is not a byte class a saved term is kept at; expected {', '.join(BYTE_CLASSES)}",
                        hint=did_you_mean(kept, BYTE_CLASSES) or "write `at compute` (the default), `at softmax`, "
                             "`at cast`, `at norm`, `at mask` or `at fp32`")
        return
    flash = term.flash.value if term.flash is not None else None
    per_key = _per_key(term.expr)
    if flash == "without":
        if per_key is not True:
            collector.error(term.expr.span, "saved-term-keys",
                            f"the saved term '{name}' is kept `without flash` but is not per key: every summand "
                            "of a score tensor's elements reads `keys` once",
                            hint="write it as elements per token and key, e.g. `heads * keys`")
        if kept == "compute":
            collector.error(term.flash.span if term.flash else term.span, "saved-term-kernel",
                            f"the score term '{name}' states no byte class: a score tensor is kept at the softmax "
                            "dtype, as its compute-dtype copy or at a fixed width",
                            hint="add `at softmax`, `at cast`, `at mask`, `at norm` or `at fp32`")
    else:
        for ref in ast.dim_names(term.expr):
            if ref.value == KEYS:
                collector.error(ref.span, "saved-term-keys",
                                f"the saved term '{name}' reads `keys` but is not kept `without flash`; only a "
                                "score tensor, which a flash kernel never keeps, grows with the keys",
                                hint="remove `keys` (elements per token), or add `recompute selective without "
                                     "flash` for a score tensor (docs/language.md, \"Saved activations\")")
        if kept in ("softmax", "cast"):
            collector.error(term.bytes.span if term.bytes else term.span, "saved-term-kernel",
                            f"the saved term '{name}' is kept `at {kept}`, a score tensor's class, but is not "
                            "kept `without flash`",
                            hint="add `recompute selective without flash` and read `keys`, or keep it `at compute`")
    if flash == "with" and kept not in FIXED_BYTES:
        collector.error(term.flash.span if term.flash else term.span, "saved-term-kernel",
                        f"the flash term '{name}' is kept at '{kept}'; a flash kernel's statistics are a fixed "
                        "width", hint="add `at fp32` (or `at norm`, `at mask`)")
    if flash is not None and term.recompute is None:
        collector.error(term.flash.span if term.flash else term.span, "saved-term-recompute",
                        f"the saved term '{name}' is kept only {flash} flash but not marked `recompute selective`; "
                        "selective recompute keeps no score tensor and no flash statistics",
                        hint="add `recompute selective` before the flash clause")
    if flash is None and term.recompute is not None:
        collector.error(term.recompute.span, "saved-term-recompute",
                        f"the saved term '{name}' states `recompute` but no flash clause; what selective recompute "
                        "drops is a score tensor (`without flash`) or flash's statistics (`with flash`)",
                        hint="remove `recompute ...`, or add `with flash` / `without flash`")
    if term.routed and (flash is not None or kept != "compute"):
        collector.error(term.flash.span if term.flash else term.bytes.span if term.bytes else term.span,
                        "saved-term-kernel", f"the saved term '{name}' is kept `routed` (per token routed to an "
                        f"expert) but {'only ' + flash + ' flash' if flash else 'at ' + kept}; a routed expert's "
                        "input is kept at the compute dtype by any kernel", hint="remove the `at` / flash clause")
    if flash is not None and (term.replicate or term.sequence):
        collector.error(term.flash.span if term.flash else term.span, "saved-term-kernel",
                        f"the saved term '{name}' is kept only {flash} flash and split "
                        f"{'whole on every tp rank' if term.replicate else 'by sequence'}; score terms are split "
                        "as the mixer's heads are", hint="remove `replicate` / `sequence`")


def _check_flops_only(term: ast.CostTerm, collector: Collector) -> None:
    """Report a FLOP term that states what only a saved term says: `sequence`, `at BYTES`, a flash clause."""
    said = [(part, what) for part, what in ((term.bytes, "at"), (term.flash, "flash"))
            if part is not None] + [(None, word) for word, said in (("sequence", term.sequence),
                                                                     ("routed", term.routed)) if said]
    for part, what in said:
        collector.error(part.span if part is not None else term.span, "saved-only-clause",
                        f"the FLOP term '{term.name.value}' states `{what}`, which only a saved term says (how "
                        "a tensor is kept for the backward)", hint=f"remove `{what} ...` from the FLOP term")


def _check_choices(expr: ast.Expr, collector: Collector) -> None:
    """Report a choice field compared in a cost term's `if` to a value it cannot take (`norm == layrnorm`)."""
    if isinstance(expr, (ast.Comparison, ast.Membership)) and expr.left.value in CHOICE_NAMES:
        choices = FIELDS[expr.left.value].choices
        values = expr.values if isinstance(expr, ast.Membership) else (expr.right,)
        for value in values:
            if str(value.value) not in choices:
                collector.error(value.span, "unknown-choice",
                                f"'{expr.left.value}' is compared to '{value.value}', which it cannot be; its "
                                f"choices are {', '.join(choices)}",
                                hint=did_you_mean(str(value.value), choices) or f"compare it to one of {', '.join(choices)}")
    elif isinstance(expr, ast.Negation):
        _check_choices(expr.operand, collector)
    elif isinstance(expr, (ast.AllOf, ast.AnyOf)):
        for operand in expr.operands:
            _check_choices(operand, collector)
    elif isinstance(expr, ast.Implies):
        _check_choices(expr.premise, collector)
        _check_choices(expr.conclusion, collector)


def _check_eager(term: ast.CostTerm, collector: Collector) -> None:
    """Report what an `eager` term may not say: a clause of FLOPs or saved tensors, `keys` or a split in `calls`.

    `calls` is a count per micro-batch on each rank; `moved` is elements per token (plus per token and key),
    split over tp as the heads unless `replicate` (whole on every tp rank) or `sequence` (split by sp).
    """
    said: list[tuple[Span, str]] = [
        (part.span, what) for part, what in ((term.bytes, "at"), (term.flash, "flash"), (term.recompute, "recompute"))
        if part is not None]
    if term.routed:  # what the experts' calls move is counted per token as any module's
        said.append((term.span, "routed"))
    if term.name.value == "calls":
        said += [(term.span, what) for what, on in (("replicate", term.replicate), ("sequence", term.sequence)) if on]
        said += [(ref.span, "keys") for ref in ast.dim_names(term.expr) if ref.value == KEYS]
    for span, what in said:
        collector.error(span, "eager-term-clause",
                        f"the eager term '{term.name.value}' states `{what}`; an eager term counts what the module "
                        "dispatches (calls: a count per micro-batch; moved: elements per token, split over tp "
                        "unless `replicate` or `sequence`)", hint=f"remove `{what}` from the eager term")


def _per_key(expr: ast.DimExpr) -> bool | None:
    """Return whether every summand of `expr` reads `keys` once (None: it does not parse as linear)."""
    lowered = dim_from_ast(expr)
    summands = lowered.operands if lowered.op == "sum" else (lowered,)
    degrees = [keys_degree(d) for d in summands]
    return None if None in degrees else all(d == 1 for d in degrees)


def _used_bindings(scope: Scope) -> list[ast.SlotBinding]:
    """Return each binding a kind of a profile in scope fills a NEEDS_SAVED mixer or feed-forward slot from, once."""
    used: dict[int, ast.SlotBinding] = {}
    for profile in scope.profiles.values():
        kinds, bound = profile_kinds(profile), profile_slots(profile, scope)
        for kind in kinds.values():
            bindings = kind_slots(kind, kinds, bound)
            for slot in _kind_slots(kind, kinds):
                binding = bindings.get(slot)
                if binding is not None:
                    used.setdefault(id(binding), binding)
    return list(used.values())


def _kind_slots(kind: ast.Kind, kinds: dict[str, ast.Kind]) -> tuple[str, ...]:
    """Return the NEEDS_SAVED slots a kind fills: its mixer's if it counts attMM, its feed-forward's if ffMM."""
    attention, ffn = kind_flavours(kind, kinds)
    vector = kind_vector(kind, kinds)

    def counts(op: str) -> bool:
        count = vector.get(op)
        return count is not None and count.count.value != 0  # an op the vocabulary lacks prices 0

    mixer = FLAVOUR_SLOTS.get(attention, ()) if counts("attMM") else ()
    feed = FFN_SLOTS.get(ffn or "dense", ()) if counts("ffMM") else ()
    return (*mixer, *feed)


def _check_saved_binding(binding: ast.SlotBinding, scope: Scope, collector: Collector) -> None:
    """Warn of a family bound to a NEEDS_SAVED mixer slot that declares no `saved` term."""
    slot, family = binding.slot.value, scope.families.get(binding.family.value)
    if slot not in NEEDS_SAVED or family is None:
        return
    if any(t.unit.value == SAVED for block in family_items(family, ast.CostBlock) for t in block.terms):
        return
    collector.warning(binding.family.span, "unpriced-activations",
                      f"family '{family.name.value}' fills slot '{slot}' but declares no `saved` term: what its "
                      "module keeps for the backward beside the layer's input prices as 0 bytes",
                      hint=f"declare what the module keeps in the family's cost block, `saved {NEEDS_SAVED[slot]} "
                           "= EXPR`: elements per token at the compute dtype over the slot's dims "
                           "(docs/language.md, \"Saved activations\")")


__all__ = ["NEEDS_SAVED", "check_cost_term", "check_cost_terms"]
