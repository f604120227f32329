"""A slot's family `cost { }` block into its FLOP terms: per token, and per token and attended key.

What a module computes beside its weight matmuls (a DSA indexer's scores, the
delta rule's chunked products, a selective scan, per-head norms, soft-capping)
is declared with its family (families/*.hpf, docs/language.md "Cost terms"),
as the weight matmuls are its layout (hpdsl/cost/facts/matmuls.py). The
compiler lowers each term to an expression (hpdsl/ir/nodes.py CostTermIR);
here it is evaluated once per column over the slot config, nothing parsed at
estimate time. An expression is linear in `keys`, the keys a query attends to,
so a term is two numbers: its FLOPs per token at no key (`t`) and per key
(`ts`); the estimator's causal and window function supplies the keys
(hpdsl/cost/formulas/flops.py `executed_keys`, `model_keys`).

How often a layer runs a term is its kind's op vector (docs/cost-model.md, "Cost
terms from the families"): TERMS names the op that counts each one, and its
count per mixer; the slots of a layer declaring a term share the layer's runs
equally (an encoder-decoder's two attentions).

A `saved` term (docs/language.md, "Saved activations") is read the same way:
its `t` is elements per token the module keeps for its backward and its `ts`
elements per token and key of a score tensor, counted as the work it is named
by, with how it is kept (byte class, split, flash) carried along;
hpdsl/cost/formulas/saved.py turns a layer's terms into its activation
coefficients (`layer_saved` here collects them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

import attrs

from hpdsl.bound.config import dim_environment
from hpdsl.bound.bind import LayerConfig
from hpdsl.bound.slots import Slot, layer_slots
from hpdsl.bound.tally import WHOLE_AXES
from hpdsl.cost.facts.params import standard_registry
from hpdsl.cost.facts.roles import FEED_FORWARD_ROLES
from hpdsl.errors import ResolutionError
from hpdsl.ir.conditions import evaluate
from hpdsl.ir.nodes import CostTermIR, DimIR, FamilyIR
from hpdsl.model import ops as OP
from hpdsl.model.cost_terms import CHOICE_NAMES, FEED_FORWARD_TERMS, FLOAT_NAMES, FLOPS, KEYS, SAVED, TERMS, UNITS, keys_degree

@attrs.frozen
class DeclaredTerm:
    """One term of a column: FLOPs (or saved elements) per token (t) and per token and key (ts), and how it runs.

    replicated / sequence / routed: whole on every tp rank / split by sequence / per routed token (else split
    as the heads); selective: what selective recompute redoes; bytes and flash: a saved term's byte class and
    kernel (CostTermIR's); role: the slot whose family declares it (hpdsl/bound/slots.py).
    """

    name: str
    t: Fraction = Fraction(0)
    ts: Fraction = Fraction(0)
    replicated: bool = False
    selective: bool = False
    sequence: bool = False
    bytes: str = "compute"
    flash: bool | None = None
    routed: bool = False
    role: str = ""

    def scaled(self, factor: Fraction) -> DeclaredTerm:
        """Return this term run `factor` times."""
        return attrs.evolve(self, t=self.t * factor, ts=self.ts * factor)


def evaluate_term(expr: DimIR, env: Mapping[str, Fraction]) -> Fraction | None:
    """Return the exact value of a term's expression over `env`, or None when it reads a name `env` lacks."""
    if expr.op == "int":
        return Fraction(int(expr.value or 0))
    if expr.op == "name":
        return env.get(str(expr.name))
    values = [evaluate_term(d, env) for d in expr.operands]
    divisors = [evaluate_term(d, env) for d in expr.divisors]
    if None in values or None in divisors:
        return None
    if expr.op == "sum":
        return sum((v for v in values if v is not None), Fraction(0))
    out = Fraction(1)
    for value in values:
        out *= value or Fraction(0)
    for divisor in divisors:
        if not divisor:
            return None
        out /= divisor
    return out


def term_environment(config: object) -> dict[str, int | float | str]:
    """Return the names a cost term reads from a slot config: dims (flags as bools), float and choice fields, axes.

    A choice field (norm, mlp, activation) is only compared in a term's `if`; an expression reads numbers.
    """
    env: dict[str, int | float | str] = {**dim_environment(config), **WHOLE_AXES}
    for name in (*FLOAT_NAMES, *CHOICE_NAMES):
        value = getattr(config, name, None)
        if isinstance(value, (float, str)):
            env.setdefault(name, value)
    return env


def slot_terms(slot: Slot, families: Mapping[str, FamilyIR], unit: str = FLOPS) -> list[DeclaredTerm]:
    """Return the cost terms of `unit` the family bound to `slot` declares and runs on its config, evaluated."""
    family = families.get(slot.family)
    costs = [cost for cost in family.costs if cost.unit == unit] if family is not None else []
    if not costs:
        return []
    env = term_environment(slot.config)
    values = {name: Fraction(value) for name, value in env.items() if not isinstance(value, str)}
    return [attrs.evolve(term, role=slot.role) for cost in costs if (term := _evaluated(cost, env, values)) is not None]


def _evaluated(cost: CostTermIR, env: Mapping[str, int | float | str], values: dict[str, Fraction]) -> DeclaredTerm | None:
    if cost.condition is not None:
        try:
            if not evaluate(cost.condition, env):
                return None
        except ResolutionError:
            return None  # the checker (hpdsl/check/cost_terms.py) names what the condition reads
    at_none = evaluate_term(cost.expr, {**values, KEYS: Fraction(0)})
    at_one = evaluate_term(cost.expr, {**values, KEYS: Fraction(1)})
    if at_none is None or at_one is None:
        return None
    return DeclaredTerm(cost.name, t=at_none, ts=at_one - at_none, replicated=cost.replicated,
                        selective=cost.selective, sequence=cost.sequence, bytes=cost.bytes, flash=cost.flash,
                        routed=cost.routed)


def layer_terms(ops: Mapping[str, int], per_slot: Iterable[list[DeclaredTerm]]) -> tuple[DeclaredTerm, ...]:
    """Return a layer's declared terms, each run as its kind's op vector counts, shared by the slots declaring it.

    A feed-forward term (FEED_FORWARD_TERMS) is not shared: each slot declaring it runs it as often.
    """
    slots = [terms for terms in per_slot if terms]
    mixers = OP.count(ops, OP.ATT_MM) > 0
    out: list[DeclaredTerm] = []
    for name, (op, per_mixer) in TERMS.items():
        declaring = [terms for terms in slots if any(t.name == name for t in terms)]
        if not declaring:
            continue
        if op is None:
            runs = Fraction(int(mixers))
        else:
            runs = Fraction(OP.count(ops, op), per_mixer) if per_mixer else Fraction(int(OP.count(ops, op) > 0))
        share = runs if name in FEED_FORWARD_TERMS else runs / len(declaring)
        out += [t.scaled(share) for terms in declaring for t in terms if t.name == name]
    return tuple(out)


def layer_saved(cfg: LayerConfig, bindings: Mapping[str, str], families: Mapping[str, FamilyIR]
                ) -> tuple[DeclaredTerm, ...]:
    """Return the `saved` terms of one layer priced with `cfg`: its slots' families', each run as the kind counts it."""
    slots = layer_slots(cfg, bindings)
    return layer_terms(cfg.ops, (slot_terms(slot, families, SAVED) for slot in slots))


def feed_forward_part(terms: Iterable[DeclaredTerm]) -> tuple[DeclaredTerm, ...]:
    """Return the terms the feed-forward's slots declare (hpdsl/cost/facts/roles.py FEED_FORWARD_ROLES)."""
    return tuple(term for term in terms if term.role in FEED_FORWARD_ROLES)


def mixer_part(terms: Iterable[DeclaredTerm]) -> tuple[DeclaredTerm, ...]:
    """Return the terms the layer's other slots declare: its mixer's (and any norm's or gate's)."""
    return tuple(term for term in terms if term.role not in FEED_FORWARD_ROLES)


def standard_saved(cfg: LayerConfig) -> tuple[DeclaredTerm, ...]:
    """Return the `saved` terms of a layer priced with `cfg` as the shipped families and bindings declare them."""
    families, bindings = standard_registry()
    return layer_saved(cfg, bindings, families)


__all__ = ["FLOAT_NAMES", "KEYS", "TERMS", "UNITS", "DeclaredTerm", "evaluate_term", "feed_forward_part", "keys_degree",
           "layer_saved", "layer_terms", "mixer_part", "slot_terms", "standard_saved", "term_environment"]
