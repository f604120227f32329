"""docs/language.md's Gemma-2 worked example through the real CLI: every command it shows.

The doc's gemma2.hpf (two models of profiles/gemma2.hpf) is cut out of the doc and
run: fmt leaves it unchanged, compile writes both models, estimate counts Gemma-2
2B as transformers does (on the meta device, Gemma2Config's defaults being its
dims), and the soft-caps' FLOPs are the doc's arithmetic. No published Gemma-2
config.json is vendored (none was found byte for byte in the search index), so the
comparison builds transformers' Gemma2Config from the model's dims.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COUNT = 2_614_341_888
"""transformers 5.24's Gemma2ForCausalLM(Gemma2Config()) on the meta device (test_the_count_is_transformers_)."""


def doc_model() -> str:
    """Return the doc's gemma2.hpf block."""
    doc = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    return "// gemma2.hpf" + doc.split("```\n// gemma2.hpf", 1)[1].split("```", 1)[0]


def hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def estimate(cwd: Path, *args: str) -> dict:
    run = hpdsl("estimate", "gemma2.hpf", "--model", "gemma2_2b", "--json", *args, cwd=cwd)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    (tmp_path / "gemma2.hpf").write_text(doc_model(), encoding="utf-8")
    return tmp_path


def test_fmt_and_compile(spec: Path) -> None:
    assert hpdsl("fmt", "--check", "gemma2.hpf", cwd=spec).returncode == 0
    run = hpdsl("compile", "gemma2.hpf", "-o", "registry.json", cwd=spec)
    assert run.returncode == 0, run.stderr
    models = json.loads((spec / "registry.json").read_text())["models"]
    assert set(models) == {"gemma2_2b", "gemma2_tiny"}
    big = models["gemma2_2b"]
    assert (big["attn_softcap"], big["final_softcap"], big["attn_scale_dim"]) == (50.0, 30.0, 256)
    assert big["embed_scale"] is True and big["norm_offset"] is True


def test_the_estimate_counts_transformers_and_the_caps_cost_the_docs_flops(spec: Path) -> None:
    capped = estimate(spec)
    assert capped["params"]["total"] == COUNT
    plain = estimate(spec, "--set", "attn_softcap=0", "--set", "final_softcap=0")
    assert plain["params"]["total"] == COUNT
    scores = 26 * 4096 * 3 * 8 * 2048
    logits = 3 * 256_000 * 4096
    assert scores + logits == 8_380_219_392
    assert capped["flops"]["forward"] - plain["flops"]["forward"] == pytest.approx(scores + logits, rel=1e-9)
    assert capped["flops"]["model_total"] == plain["flops"]["model_total"]  # no model (MFU) FLOP


def test_a_negative_cap_or_scale_is_a_located_diagnostic(spec: Path) -> None:
    (spec / "gemma2.hpf").write_text(doc_model().replace("attn_softcap 1.0", "attn_softcap -1.0"))
    run = hpdsl("compile", "gemma2.hpf", cwd=spec)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "gemma2.hpf:22:7: error[non-positive-field]: 'attn_softcap' must be at least 0" in run.stderr
    assert "hint:" in run.stderr
    (spec / "gemma2.hpf").write_text(doc_model().replace("attn_scale_dim 24", "attn_scale_dim -24"))
    run = hpdsl("compile", "gemma2.hpf", cwd=spec)
    assert run.returncode == 1 and "Traceback" not in run.stderr and "attn_scale_dim" in run.stderr
    assert "hint:" in run.stderr


def test_the_count_is_transformers_and_build_models(spec: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hpdsl.api import compile_sources
    from hpdsl.diagnostics import Source
    from hpdsl.torch import build_model

    with torch.device("meta"):
        theirs = transformers.Gemma2ForCausalLM(transformers.Gemma2Config())
    assert sum(p.numel() for p in theirs.parameters()) == COUNT
    registry = compile_sources([Source("gemma2.hpf", doc_model())])
    built = build_model(registry.models["gemma2_2b"], registry=registry, device="meta")
    assert sum(p.numel() for p in built.parameters()) == COUNT
