"""Torch-backend test configuration: skip the folder without torch, keep each test to one thread.

This folder is named `torch`; without a real torch installed, `import torch`
could find it as a namespace package, so the check is for `torch.nn`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# bench/agreement.py (built models measured against the estimator) is a harness, not
# part of hpdsl: bench/validate_estimator.py prints its rows, test_estimator_agreement.py
# holds them, both importing it from bench/.
BENCH = str(Path(__file__).resolve().parents[2] / "bench")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

try:
    import torch
    import torch.nn  # noqa: F401
except ImportError:
    collect_ignore_glob = ["test_*.py"]
else:
    # The suite runs on two shared cores: one intra-op thread avoids oversubscription.
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def stdlib_registry():
    """Return the registry of the shipped profiles and families."""
    from hpdsl.torch import standard_registry

    return standard_registry()


@pytest.fixture(scope="session")
def small_registry():
    """Return the registry of the small test specs (with the standard library)."""
    from torch_support import small_registry as build

    return build()


@pytest.fixture(scope="session")
def examples_registry():
    """Return the registry of examples/*.hpf (with the standard library)."""
    from torch_support import examples_registry as build

    return build()
