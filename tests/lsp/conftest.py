"""The language-server tests: a real `hpdsl lsp` subprocess per test, driven by tests/lsp_client.py."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lsp_client import Client  # noqa: E402


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    """Return an initialized client rooted at the test's folder (UTF-16 positions, the default)."""
    client = Client(tmp_path)
    client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})
    client.notify("initialized", {})
    yield client
    client.close()
