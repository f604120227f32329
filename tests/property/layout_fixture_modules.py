"""A module that creates exactly the parameters a drawn layout spec says (tests/property/test_layout_estimate_props.py).

The spec is plain data passed as the variant's `spec` argument: per parameter,
its name, its dims (each a sum of products of config names and ints) and its
condition (None, a flag with a polarity, or an int compared with `>`). The
module evaluates it in Python on its config, apart from hpdsl's layout code,
so the property compares two independent readings of one layout.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

Factor = str | int
Dim = tuple[tuple[Factor, ...], ...]            # a sum of products
Condition = tuple[str, bool] | tuple[str, int] | None   # (flag, set?) or (int name, threshold)
Entry = tuple[str, tuple[Dim, ...], Condition]


def dim_value(dim: Dim, config: Any) -> int:
    """Return a drawn dim on `config`: the sum of its products."""
    return sum(math.prod(getattr(config, f) if isinstance(f, str) else f for f in term) for term in dim)


def holds(condition: Condition, config: Any) -> bool:
    """Return whether a drawn condition holds on `config`."""
    if condition is None:
        return True
    name, value = condition
    if isinstance(value, bool):
        return bool(getattr(config, name)) is value
    return int(getattr(config, name)) > value


class Drawn(nn.Module):
    """Creates each spec entry whose condition holds (and one stray parameter when told to)."""

    def __init__(self, config: Any, *, spec: tuple[Entry, ...] = (), stray: bool = False, **_: Any) -> None:
        super().__init__()
        for name, dims, condition in spec:
            if holds(condition, config):
                self.register_parameter(name, nn.Parameter(torch.empty(*(dim_value(d, config) for d in dims))))
        if stray:
            self.stray = nn.Parameter(torch.empty(1))
