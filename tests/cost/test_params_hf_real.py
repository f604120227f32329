"""Configs of current models: `hpdsl import-hf` + `hpdsl estimate --json` + build_model equal transformers.

Each config of tests/importers/hf_configs.py that is no file (HAND_WRITTEN, DERIVED) is written as a
config.json, imported, checked by `hpdsl fmt --check` and estimated through the CLI, and its
params.total (and params.active for MoE) compared with the transformers model built from the same config on the meta
device; build_model of the imported model (meta device) must have the same parameter count.

A published file (FILES) runs that CLI path in tests/importers/test_published_architectures.py, against
tests/data/hf/counts.json, which its slow test recounts with transformers (bench/hf_counts.py --check);
here its import is formatted canonically and built on the meta device with counts.json's count, in
process: the same chain of equalities without a second round of subprocesses and transformers builds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from hf_counts import hf_counts  # noqa: E402  (bench/hf_counts.py: transformers' count on the meta device)

from hpdsl.api import check_sources, compile_paths  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.fmt import format_source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from tests.importers.hf_configs import (  # noqa: E402
    CONFIGS, DATA, FILES, JAMBA_V0_1, REFUSED_TODAY, config_bytes, published,
)

COUNTS: dict[str, Any] = json.loads((DATA / "counts.json").read_text(encoding="utf-8"))["counts"]
PRICED_FILES = sorted(set(FILES) - set(REFUSED_TODAY))


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def import_and_estimate(name: str, tmp_path: Path) -> dict[str, Any]:
    """Run the user's path on the config's file: `hpdsl import-hf`, `hpdsl fmt --check`, `hpdsl estimate --json`."""
    (tmp_path / "config.json").write_bytes(config_bytes(name))
    imported = _hpdsl("import-hf", "config.json", "--name", name, "-o", f"{name}.hpf", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert _hpdsl("fmt", "--check", f"{name}.hpf", cwd=tmp_path).returncode == 0
    estimate = _hpdsl("estimate", f"{name}.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    return dict(json.loads(estimate.stdout)["params"])


def _built_count(path: Path, name: str) -> int:
    registry = compile_paths([path])
    built = build_model(registry.models[name], registry=registry, device="meta")
    return sum(p.numel() for p in built.parameters())


@pytest.mark.parametrize("name", sorted(set(CONFIGS) - set(FILES)))
def test_config_is_exact_and_builds_with_its_count(name: str, tmp_path: Path) -> None:
    config, how = CONFIGS[name]
    params = import_and_estimate(name, tmp_path)
    total, active = hf_counts(config, how)
    assert params["total"] == total
    if active is not None:
        assert params["active"] == active
    assert _built_count(tmp_path / f"{name}.hpf", name) == total


@pytest.fixture(scope="module")
def stdlib_profiles():
    registry = check_sources([], stdlib=True).registry
    assert registry is not None
    return registry.profiles


@pytest.mark.parametrize("name", PRICED_FILES)
def test_published_file_imports_canonically_and_builds_with_its_count(name: str, tmp_path: Path,
                                                                      stdlib_profiles) -> None:
    imported = import_hf_config(published(name), profiles=stdlib_profiles, name=name)
    assert format_source(Source(f"{name}.hpf", imported.text)) == imported.text  # what `fmt --check` holds
    (tmp_path / f"{name}.hpf").write_text(imported.text, encoding="utf-8")
    assert _built_count(tmp_path / f"{name}.hpf", name) == COUNTS[name]["total"]


def test_jamba_imports_its_period_rules_as_runs(tmp_path: Path) -> None:
    """attn_layer_period 8 offset 4, expert_layer_period 2 offset 1: one period of eight kinds, four times."""
    (tmp_path / "config.json").write_text(json.dumps(JAMBA_V0_1))
    assert _hpdsl("import-hf", "config.json", "--name", "jamba", "-o", "jamba.hpf", cwd=tmp_path).returncode == 0
    text = (tmp_path / "jamba.hpf").read_text()
    assert ("stack [mamba_dense, mamba_moe, mamba_dense, mamba_moe, attention_dense, mamba_moe, mamba_dense, "
            "mamba_moe] * 4") in text
    assert "ssm_dt_rank 256" in text and "ssm_norms true" in text


CONFIG_FILES = Path(__file__).resolve().parents[1] / "importers" / "configs"
REAL_FILES: dict[str, str] = {
    # Qwen3.6-35B-A3B (Qwen3_5MoeForConditionalGeneration, model_type qwen3_5_moe, text_config
    # qwen3_5_moe_text), the published config.json byte for byte, from yuancaoyaoHW/verl-npu
    # models/Qwen3.6-35B-A3B/config.json at fbe387e362ff091bd07572a91d3f98d0b0e285c9. It states
    # text_config.mamba_ssm_dtype and text_config.mtp_use_dedicated_embeddings, which the
    # importer refused before the qwen3_5 profile's import rules named them.
    "qwen3_6_35b_a3b": "qwen3_6_35b_a3b.json",
}
"""Real config.json files, copied byte for byte under tests/importers/configs/ (source cited per entry)."""


@pytest.mark.parametrize("name", sorted(REAL_FILES))
def test_a_real_config_file_imports_exact(name: str, tmp_path: Path) -> None:
    """The file itself goes through the CLI; a composite config is priced as its language model, saying so."""
    source = CONFIG_FILES / REAL_FILES[name]
    (tmp_path / "config.json").write_bytes(source.read_bytes())
    imported = _hpdsl("import-hf", "config.json", "--name", name, "-o", f"{name}.hpf", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "priced as its language model" in imported.stderr and "vision_config" in imported.stderr
    estimate = _hpdsl("estimate", f"{name}.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    params = json.loads(estimate.stdout)["params"]
    config = json.loads(source.read_text())
    total, active = hf_counts(config, "vl")
    assert params["total"] == total
    assert active is None or params["active"] == active

    from hpdsl.api import compile_paths
    from hpdsl.torch import build_model

    registry = compile_paths([tmp_path / f"{name}.hpf"])
    built = build_model(registry.models[name], registry=registry, device="meta")
    assert sum(p.numel() for p in built.parameters()) == total
