"""The cost side: bind a compiled model to its profile, count parameters, price strategies."""

from hpdsl.bound.bind import BoundKind, CostGroup, CostModel, LayerConfig, MutableLayerConfig, bind
from hpdsl.cost.params import LayerParams, ParamReport, layer_params, parameters

__all__ = ["BoundKind", "CostGroup", "CostModel", "LayerConfig", "LayerParams",
           "MutableLayerConfig", "ParamReport", "bind", "layer_params", "parameters"]
