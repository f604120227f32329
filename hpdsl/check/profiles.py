"""Checks of profiles (placeholder until its owner lands it)."""

from __future__ import annotations

from hpdsl.check.scope import Scope
from hpdsl.diagnostics import Collector


def check_profiles(scope: Scope, collector: Collector) -> None:
    """Report every problem with the profiles in scope."""
