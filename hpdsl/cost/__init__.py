"""The cost side: bind a compiled model to its profile, count parameters, price strategies.

    cost_model = bind(registry.model("llama3_8b"), registry.profile("llama"), families=registry.families)
    parameters(cost_model)                    -> ParamReport (exact counts)
    estimate(cost_model, Strategy(tp=8))      -> Estimate (memory, FLOPs, time of one strategy)
    search(cost_model, devices=64)            -> SearchResult (every valid strategy, ranked)

The estimator's names (numpy) load on first use, so binding a model, as the
layout check does while compiling, does not load numpy. Two of them are also
the names of their modules: `hpdsl.cost.estimate` and `hpdsl.cost.search` are
always the functions (the modules stay importable by path).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from hpdsl.bound.bind import BoundKind, CostGroup, CostModel, LayerConfig, MutableLayerConfig, bind
from hpdsl.cost.params import LayerParams, ParamReport, layer_params, parameters

if TYPE_CHECKING:
    from hpdsl.cost.estimate import Estimate, estimate
    from hpdsl.cost.search import SearchResult, search
    from hpdsl.cost.strategy import InvalidStrategyError, Strategy

# Public name -> the module that defines it, imported on first use.
_LAZY: dict[str, str] = {
    "Estimate": "hpdsl.cost.estimate",
    "estimate": "hpdsl.cost.estimate",
    "SearchResult": "hpdsl.cost.search",
    "search": "hpdsl.cost.search",
    "InvalidStrategyError": "hpdsl.cost.strategy",
    "Strategy": "hpdsl.cost.strategy",
}


def __getattr__(name: str) -> Any:
    """Import an estimator name on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'hpdsl.cost' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """List the estimator's names too, before they are imported."""
    return sorted({*globals(), *_LAZY})


class _Package(types.ModuleType):
    """hpdsl.cost, whose functions `estimate` and `search` keep their names when their modules load."""

    def __setattr__(self, name: str, value: Any) -> None:
        # The import system binds each loaded submodule on its package by name; for
        # these two the function is the public meaning, found by __getattr__ instead.
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = ["BoundKind", "CostGroup", "CostModel", "Estimate", "InvalidStrategyError", "LayerConfig",
           "LayerParams", "MutableLayerConfig", "ParamReport", "SearchResult", "Strategy", "bind",
           "estimate", "layer_params", "parameters", "search"]
