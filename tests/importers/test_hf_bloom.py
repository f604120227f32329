"""The bloom profile's import rules (profiles/bloom.hpf): a BLOOM config imports as ALiBi layers with an embedding norm.

No published BLOOM config.json is in the search index (2026-12-02: bigscience/bloom-560m and its
kin are quoted only inside other files, never byte for byte), so the config here is transformers'
own serialisation of `BloomConfig` at bloom-560m's dims (`to_json_file`), not a file written by
hand. `hpdsl import-hf` of it, through the real CLI, writes the profile's facts and the estimate
is transformers' count of `BloomForCausalLM` on the meta device.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_a_bloom_config_imports_with_alibi_and_an_embedding_norm_at_transformers_count(tmp_path: Path) -> None:
    config = transformers.BloomConfig(hidden_size=1024, n_layer=24, n_head=16, vocab_size=250880)
    config.to_json_file(str(tmp_path / "config.json"))
    assert {"n_layer", "n_head", "apply_residual_connection_post_layernorm"} <= set(
        json.loads((tmp_path / "config.json").read_text()))
    run = _hpdsl("import-hf", "config.json", "--name", "bloom_560m", "-o", "bloom.hpf", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    written = (tmp_path / "bloom.hpf").read_text()
    for line in ("alibi true", "embed_norm true", "ffn_width 4096", "activation gelu_tanh", "tie_embeddings true"):
        assert f"  {line}\n" in written, line
    estimate = _hpdsl("estimate", "bloom.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    with torch.device("meta"):
        theirs = transformers.BloomForCausalLM(config)
    assert json.loads(estimate.stdout)["params"]["total"] == sum(p.numel() for p in theirs.parameters()) \
        == 559_214_592
