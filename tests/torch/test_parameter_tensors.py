"""The parameter tensors the estimator counts from the layouts against the modules the backend builds (issue 22).

The device's tensor_overhead prices a step's per-tensor host work (gradient norm,
AdamW, zero_grad) per parameter tensor, counted per pricing column from the slots'
layouts (hpdsl/cost/facts/tensors.py); the built model must hold as many.
"""

from __future__ import annotations

import pytest
from torch_support import examples_registry, shrink  # noqa: F401  (a fixture)

from hpdsl.cost import bind
from hpdsl.cost.price.prepare import prepare
from hpdsl.torch import build_model

EXAMPLES = ("llama3_8b", "llama2_7b", "mixtral_8x7b", "qwen3_30b_a3b", "deepseek_v3", "t5_small")


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_layouts_count_every_parameter_tensor_the_backend_builds(examples_registry, name: str) -> None:
    model = shrink(examples_registry.model(name))
    built = build_model(model, registry=examples_registry, include_mtp=True)
    prepared = prepare(bind(model, examples_registry.profile(model.profile)))
    cols = prepared.columns
    counted = sum(n * prepared.tensors[j] for j, n in (*cols.body_runs, *cols.mtp_runs))
    counted += prepared.tensors[cols.embedding] + prepared.tensors[cols.output]
    assert counted == len(list(built.parameters()))
