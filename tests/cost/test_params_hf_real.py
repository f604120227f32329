"""Published configs of current models: `hpdsl import-hf` + `hpdsl estimate --json` equal transformers.

Each config of tests/importers/hf_configs.py is written as a config.json (a published file's own
bytes; a hand-written one's JSON), imported and
estimated through the CLI, and its params.total (and params.active for MoE) compared with
the transformers model built from the same config on the meta device; build_model of the
imported model (meta device) must have the same parameter count.
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

from tests.importers.hf_configs import CONFIGS, JAMBA_V0_1, config_bytes  # noqa: E402


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


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_published_config_is_exact(name: str, tmp_path: Path) -> None:
    config, how = CONFIGS[name]
    params = import_and_estimate(name, tmp_path)
    total, active = hf_counts(config, how)
    assert params["total"] == total
    if active is not None:
        assert params["active"] == active


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_build_model_has_the_same_count(name: str, tmp_path: Path) -> None:
    from hpdsl.api import compile_paths
    from hpdsl.torch import build_model

    config, how = CONFIGS[name]
    (tmp_path / "config.json").write_bytes(config_bytes(name))
    assert _hpdsl("import-hf", "config.json", "--name", name, "-o", f"{name}.hpf", cwd=tmp_path).returncode == 0
    registry = compile_paths([tmp_path / f"{name}.hpf"])
    built = build_model(registry.models[name], registry=registry, device="meta")
    assert sum(p.numel() for p in built.parameters()) == hf_counts(config, how)[0]


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
