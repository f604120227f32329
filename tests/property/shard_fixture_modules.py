"""Modules that create exactly the Linear layers and tensors a drawn sharded layout says (tests/property/test_shard_estimate_props.py).

The spec is plain data passed as the variant's `spec` argument: per entry, its
name, whether it is an nn.Linear (the only module hpdsl/torch/layout.py
shards) or a plain tensor, its (out, in) dims (each a sum of products of
config names and ints), its placement over tp, whether a Linear has a bias,
and its condition. The module evaluates the spec in Python on its config,
apart from hpdsl's layout code.
"""

from __future__ import annotations

from typing import Any

import torch
from layout_fixture_modules import Condition, Dim, dim_value, holds
from torch import nn

ShardEntry = tuple[str, bool, Dim, Dim, str, bool, Condition]
"""(name, is a Linear, out dim, in dim, placement, has a bias, condition)."""


class DrawnSharded(nn.Module):
    """Creates each spec entry whose condition holds: an nn.Linear(in, out) or a plain (out, in) tensor."""

    def __init__(self, config: Any, *, spec: tuple[ShardEntry, ...] = (), **_: Any) -> None:
        super().__init__()
        for name, linear, out_dim, in_dim, _placement, bias, condition in spec:
            if not holds(condition, config):
                continue
            rows, columns = dim_value(out_dim, config), dim_value(in_dim, config)
            if linear:
                setattr(self, name, nn.Linear(columns, rows, bias=bias))
            else:
                self.register_parameter(name, nn.Parameter(torch.empty(rows, columns)))
