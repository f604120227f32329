"""The importer tests' one way to run the real CLI on a config: import-hf it, then estimate the model it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `hpdsl ARGS` in a subprocess in `cwd`."""
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def import_config(config: dict[str, Any], tmp_path: Path, name: str) -> subprocess.CompletedProcess[str]:
    """Write `config` as config.json under `tmp_path` and import it as model `name` into NAME.hpf."""
    (tmp_path / "config.json").write_text(json.dumps(config))
    return hpdsl("import-hf", "config.json", "--name", name, "-o", f"{name}.hpf", cwd=tmp_path)


def estimate_config(config: dict[str, Any], tmp_path: Path, name: str) -> tuple[dict[str, Any], str]:
    """Import `config` and return (`estimate --json`'s params, the .hpf text import-hf wrote)."""
    imported = import_config(config, tmp_path, name)
    assert imported.returncode == 0, imported.stderr
    estimate = hpdsl("estimate", f"{name}.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    return json.loads(estimate.stdout)["params"], (tmp_path / f"{name}.hpf").read_text()


def published_built_total(name: str, tmp_path: Path) -> int:
    """Return build_model's parameters of the published file NAME (tests/data/hf/) as `hpdsl import-hf` writes it."""
    from tests.importers.hf_configs import published

    imported = import_config(published(name), tmp_path, name)
    assert imported.returncode == 0, imported.stderr
    return built_total(tmp_path / f"{name}.hpf", name)


def built_total(spec: Path, name: str) -> int:
    """Return the parameters `build_model` creates for model `name` of `spec`, built on the meta device."""
    from hpdsl.api import compile_paths
    from hpdsl.torch import build_model

    registry = compile_paths([spec])
    built = build_model(registry.models[name], registry=registry, device="meta")
    return sum(p.numel() for p in built.parameters())
