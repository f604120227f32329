"""AST into diagnostics: every check reports into one collector, raised once.

The order is fixed: names (the scope), profiles, families, slot bindings (which
name families), models, then layouts
(which judge families against the models, so they run last); each check module
owns one concern and never raises.
"""

from __future__ import annotations

from collections.abc import Sequence

from hpdsl import ast
from hpdsl.check.families import check_families
from hpdsl.check.layouts import check_layouts
from hpdsl.check.models import check_models
from hpdsl.check.profiles import check_profiles
from hpdsl.check.scope import build_scope
from hpdsl.check.slots import check_slots
from hpdsl.diagnostics import Collector, Diagnostic
from hpdsl.scope import Scope


def check_files(files: Sequence[ast.File]) -> tuple[Scope, tuple[Diagnostic, ...]]:
    """Check parsed files together; return the scope and every diagnostic, sorted."""
    collector = Collector()
    scope = build_scope(files, collector)
    check_profiles(scope, collector)
    check_families(scope, collector)
    check_slots(scope, collector)
    check_models(scope, collector)
    check_layouts(scope, collector)
    return scope, collector.sorted()


__all__ = ["check_files"]
