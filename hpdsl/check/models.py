"""Checks of models (placeholder until its owner lands it)."""

from __future__ import annotations

from hpdsl.check.scope import Scope
from hpdsl.diagnostics import Collector


def check_models(scope: Scope, collector: Collector) -> None:
    """Report every problem with the models in scope."""
