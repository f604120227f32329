"""Family `cost { }` blocks into diagnostics: units, term names, the names an expression reads, linearity in keys.

Each term is judged on its own (docs/language.md, "Cost terms"): its unit is one
of hpdsl/model/cost_terms.py UNITS, its name one of TERMS, its expression
reads only slot-config names (DIM_NAMES, the float fields, the author fields
declared), cp, ep, pp and `keys`, and is linear in `keys` (no `keys` in a
divisor, none times another); `recompute` names `selective`; its `if` reads as a
layout entry's does (hpdsl/check/layouts.py).
"""

from __future__ import annotations

from hpdsl import ast
from hpdsl.bound.config import DIM_NAMES
from hpdsl.check.coverage import family_items
from hpdsl.check.layouts import _check_condition_name, _condition_names
from hpdsl.model.cost_terms import FLOAT_NAMES, KEYS, TERMS, UNITS, keys_degree
from hpdsl.diagnostics import Collector, did_you_mean
from hpdsl.ir.layouts import dim_from_ast
from hpdsl.ir.lower_fields import declared_dim_names
from hpdsl.model.layouts import LAYOUT_AXES
from hpdsl.scope import Scope


def check_cost_terms(scope: Scope, collector: Collector) -> None:
    """Report every problem with the cost terms of the families in scope."""
    declared = declared_dim_names(scope)
    for file in scope.files:
        for item in file.items:
            if isinstance(item, ast.Family):
                for block in family_items(item, ast.CostBlock):
                    for term in block.terms:
                        check_cost_term(term, collector, declared)


def check_cost_term(term: ast.CostTerm, collector: Collector, declared: frozenset[str]) -> None:
    """Report every problem with one cost term."""
    if term.unit.value not in UNITS:
        collector.error(term.unit.span, "unknown-cost-unit",
                        f"'{term.unit.value}' is not a cost term's unit; expected {', '.join(UNITS)}",
                        hint=did_you_mean(term.unit.value, UNITS) or "write `flops NAME = ...` (forward FLOPs per token)")
    if term.name.value not in TERMS:
        collector.error(term.name.span, "unknown-cost-term",
                        f"'{term.name.value}' is not a term the estimator prices; expected one of {', '.join(TERMS)}",
                        hint=did_you_mean(term.name.value, TERMS) or
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
        for ref, alone in _condition_names(term.condition):
            if ref.value not in FLOAT_NAMES:
                _check_condition_name(ref, alone, collector, declared)


__all__ = ["check_cost_term", "check_cost_terms"]
