"""A million layers priced on runs: the columns and layouts hold run-length bodies, never one entry per layer.

(tests/cost/test_search_speedups.py holds layouts from runs equal to the per-layer loop.)
"""

from __future__ import annotations

import numpy as np

from hpdsl.api import compile_sources
from hpdsl.bound.bind import bind
from hpdsl.cost import Strategy, estimate
from hpdsl.cost.price.prepare import prepare
from hpdsl.diagnostics import Source
from hpdsl.model.fields import MAX_LAYERS


def _model(layers: int) -> str:
    return f"model tall : qwen {{ hidden 1024  layers {layers}  heads 8  vocab 1000  ffn_width 4096 }}"


def test_a_million_layer_model_is_estimated_from_its_runs() -> None:
    registry = compile_sources([Source("tall.hpf", _model(MAX_LAYERS)),
                                Source("short.hpf", _model(1024).replace("tall", "short")),
                                Source("mid.hpf", _model(2048).replace("tall", "mid"))])
    models = {name: bind(registry.models[name], registry.profile(registry.models[name].profile))
              for name in ("tall", "short", "mid")}
    columns = prepare(models["tall"]).columns
    assert columns.body_runs == ((0, MAX_LAYERS),) and columns.layers == MAX_LAYERS
    strategy = Strategy(tp=8, pp=16, global_batch=1024, recompute="full", recompute_layers=1000)
    totals = {name: estimate(model, strategy).params.total for name, model in models.items()}
    per_layer = (totals["mid"] - totals["short"]) // 1024
    assert totals["tall"] == totals["short"] + (MAX_LAYERS - 1024) * per_layer  # linear in layers, exactly
    tall = estimate(models["tall"], strategy)
    assert np.isfinite(tall.step_time_s) and tall.memory.peak_bytes > estimate(models["mid"], strategy).memory.peak_bytes
