"""hpdsl/torch/validate.py: the gap between a run's gradients and one process's reference."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from hpdsl.torch.validate import grad_gap, worst  # noqa: E402


def test_a_nan_gradient_is_a_nan_gap_whatever_its_place() -> None:
    """Python's max keeps a NaN only where it comes first; a NaN gradient must never read as a small gap."""
    for first in (True, False):
        model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
        reference = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
        for index, param in enumerate(model.parameters()):
            param.grad = torch.full_like(param, math.nan if (index == 0) == first else 0.5)
        gap, scale = grad_gap(model, reference)
        assert math.isnan(gap) and scale == 0.0


def test_worst_is_max_unless_a_value_is_nan() -> None:
    assert worst(1.0, 3.0, 2.0) == 3.0
    assert math.isnan(worst(1.0, math.nan)) and math.isnan(worst(math.nan, 1.0))
