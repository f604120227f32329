"""AST into diagnostics, then the IR of what checked clean into more: one collector, ordered passes.

1. AST passes, in a fixed order: names (the scope), field declarations, profiles, families, slot
   bindings (which name families), models, layouts on their own, devices and clusters. Each owns one
   concern and never raises.
2. The declarations without errors are lowered and bound (clean.py); nothing
   else is, so lowering may assume the checks passed.
3. IR passes over what is clean, each handing the next what it left clean:
   layer shapes against the torch backend's rules (shapes.py), then layout
   divisibility over the models (divisibility.py). They report through the
   IR's source references.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from hpdsl import ast
from hpdsl.acyclic import acyclic_allocations
from hpdsl.check.clean import Clean, lower_clean
from hpdsl.check.cost_terms import check_cost_terms
from hpdsl.check.divisibility import check_divisibility
from hpdsl.check.families import check_families
from hpdsl.check.fields import check_fields
from hpdsl.check.layouts import check_layouts
from hpdsl.check.machines import check_machines
from hpdsl.check.models import check_models
from hpdsl.check.profiles import check_profiles
from hpdsl.check.scope import build_scope
from hpdsl.check.shapes import check_shapes
from hpdsl.check.slots import check_slots
from hpdsl.diagnostics import Collector, Diagnostic
from hpdsl.scope import Scope

AST_PASSES: tuple[Callable[[Scope, Collector], None], ...] = (
    check_fields, check_profiles, check_families, check_slots, check_models, check_layouts, check_cost_terms,
    check_machines)
"""The checks of the AST, in order."""

IR_PASSES: tuple[Callable[[Clean, Collector], Clean], ...] = (check_shapes, check_divisibility)
"""The checks of the clean IR, in order; each returns what it left clean for the next."""


@attrs.frozen
class Checked:
    """What a check found: the scope, every diagnostic (sorted), and what it lowered clean (`clean.lowered()`)."""

    scope: Scope
    diagnostics: tuple[Diagnostic, ...]
    clean: Clean


def check_files(files: Sequence[ast.File]) -> tuple[Scope, tuple[Diagnostic, ...]]:
    """Check parsed files together; return the scope and every diagnostic, sorted."""
    checked = check_lowering(files)
    return checked.scope, checked.diagnostics


def check_lowering(files: Sequence[ast.File]) -> Checked:
    """Check parsed files together; return the scope, every diagnostic and the clean declarations lowered."""
    with acyclic_allocations():  # the checks build frozen, acyclic values (hpdsl/acyclic.py)
        return _check_files(files)


def _check_files(files: Sequence[ast.File]) -> Checked:
    collector = Collector()
    scope = build_scope(files, collector)
    for check in AST_PASSES:
        check(scope, collector)
    clean = lower_clean(scope, collector.diagnostics)
    for judge in IR_PASSES:
        clean = judge(clean, collector)
    return Checked(scope, collector.sorted(), clean)


__all__ = ["AST_PASSES", "IR_PASSES", "Checked", "check_files", "check_lowering"]
