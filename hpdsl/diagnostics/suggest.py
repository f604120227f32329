"""Suggestions for a misspelt name: the closest candidate, or the list of them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """Return a hint naming the closest candidates, or listing them all."""
    options = sorted(set(candidates))
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    if not options:
        return "none are declared"
    shown = ", ".join(f"'{o}'" for o in options[:12])
    return f"expected one of {shown}" + (", ..." if len(options) > 12 else "")
