"""The cost side: count parameters and price strategies of a bound model.

    cost_model = bind(registry.model("llama3_8b"), registry.profile("llama"), families=registry.families)
    parameters(cost_model)                    -> ParamReport (exact counts)
    estimate(cost_model, Strategy(tp=8))      -> Estimate (memory, FLOPs, time of one strategy)
    search(cost_model, devices=64)            -> SearchResult (every valid strategy, ranked)

Layers, each importing only those below it (tests/test_imports.py holds it):

    facts/        what the model, profile, devices, precisions and bounds state; the strategy grid
    formulas/     bytes, FLOPs, traffic and time of a column, for arrays and floats alike
    feasibility/  the rules, and the coded problems that keep a strategy from running
    price/        a prepared model (with its PriceCache), a grid priced as arrays, one strategy's plan
    sweep/        the search's space, the bounded sweep and the ranking
    estimate.py · search.py · diff.py (the top: what callers use) · heap.py

`Strategy` is the model layer's (hpdsl/model/strategy.py); `bind` lives there
too (hpdsl/bound/bind.py) and both are re-exported here. `estimate` and `search`
are also the names of their modules: importing them here binds the functions on
the package, so `hpdsl.cost.estimate` is the function (the modules stay
importable by path, and Python does not rebind an attribute for a submodule it
has already loaded). Hold a `Prepared` (hpdsl.cost.price.prepare.prepare) to
price many strategies of one model: its PriceCache keeps the compiled plans.
"""

from __future__ import annotations

from hpdsl.bound.bind import BoundKind, CostGroup, CostModel, LayerConfig, bind
from hpdsl.cost.estimate import Estimate, estimate
from hpdsl.cost.facts.params import LayerParams, ParamReport, layer_params, parameters
from hpdsl.cost.feasibility.problems import InvalidStrategyError
from hpdsl.cost.search import SearchResult, search
from hpdsl.model.strategy import Strategy

__all__ = ["BoundKind", "CostGroup", "CostModel", "Estimate", "InvalidStrategyError", "LayerConfig",
           "LayerParams", "ParamReport", "SearchResult", "Strategy", "bind",
           "estimate", "layer_params", "parameters", "search"]
