"""Property-test configuration: the torch-backed properties are skipped without torch."""

from __future__ import annotations

try:
    import torch.nn  # noqa: F401
except ImportError:
    collect_ignore = ["test_resolve_props.py"]
