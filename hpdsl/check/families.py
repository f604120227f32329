"""Checks of families (placeholder until its owner lands it)."""

from __future__ import annotations

from hpdsl.check.scope import Scope
from hpdsl.diagnostics import Collector


def check_families(scope: Scope, collector: Collector) -> None:
    """Report every problem with the families in scope."""
