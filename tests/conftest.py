"""Shared test configuration: hypothesis profiles chosen by HPDSL_HYPOTHESIS_PROFILE, xdist groups honoured."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HPDSL_HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add --update-golden: rewrite the snapshots under tests/golden/ instead of comparing."""
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the golden files under tests/golden/ from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Return whether this run rewrites golden files (pytest --update-golden)."""
    return bool(request.config.getoption("--update-golden"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Under `pytest -n N` send the tests of one `xdist_group` to one worker (xdist's loadgroup, else as load).

    The multi-process trainer tests of a file share one launch (tests/torch/train_batch.py) through a
    module fixture; on two workers each would run that launch again.
    """
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"
