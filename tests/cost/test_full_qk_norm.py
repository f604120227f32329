"""A full-width QK-norm (OLMoE's qk_norm_full) is exact only at tp = 1: estimate, search and build refuse tp > 1.

The norm's statistics span every head; tensor parallelism gives each rank
heads / tp of them, and hpdsl builds no all-reduce of the statistics. The
refusal is data: families/attention.hpf's `require qk_norm and qk_norm_full ->
tp == 1`, whose selectors follow the model's fields of the same name. The
per-head QK-norm (Qwen3, Gemma 3) splits with its heads and stays allowed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hpdsl.api import compile_paths
from hpdsl.bound.bind import CostModel, bind
from hpdsl.cost.estimate import estimate
from hpdsl.cost.feasibility.problems import InvalidStrategyError
from hpdsl.cost.search import search
from hpdsl.model.strategy import Strategy

SPEC = """model {name} : {profile} {{
  hidden 256
  layers 2
  heads 8
  kv_heads 8
  vocab 1000
  ffn_width 128
  tie_embeddings false
  qk_norm true
  qk_norm_full {full}
  moe {{ experts 8  top_k 2  expert_width 128 }}
}}
"""


def spec(tmp_path: Path, profile: str = "olmoe", *, full: bool = True) -> Path:
    """Return the path of a small MoE model with a QK-norm, full-width or per head."""
    path = tmp_path / f"{profile}_{full}.hpf"
    path.write_text(SPEC.format(name=f"small_{profile}", profile=profile, full=str(full).lower()))
    return path


def bound(path: Path) -> CostModel:
    """Return the bound model of a one-model spec, with the registry's families (as the CLI binds)."""
    registry = compile_paths([path])
    (model,) = registry.models.values()
    return bind(model, registry.profiles[model.profile], families=registry.families)


def test_estimate_refuses_tp_above_one_naming_the_norm(tmp_path: Path) -> None:
    model = bound(spec(tmp_path, "olmoe"))
    estimate(model, Strategy(tp=1, seq_len=512))
    with pytest.raises(InvalidStrategyError) as refused:
        estimate(model, Strategy(tp=2, seq_len=512, sequence_parallel=True))
    assert any(r.startswith("attention: family 'attention': a full-width QK-norm (qk_norm_full)")
               and r.endswith("use tp = 1") for r in refused.value.reasons)


def test_a_per_head_qk_norm_splits_with_its_heads(tmp_path: Path) -> None:
    estimate(bound(spec(tmp_path, full=False)), Strategy(tp=2, seq_len=512, sequence_parallel=True))


def test_search_never_offers_tp_above_one(tmp_path: Path) -> None:
    result = search(bound(spec(tmp_path, "olmoe")), 8, global_batch=16, seq_len=512, top=50)
    assert result.top and all(e.strategy.tp == 1 for e in result.top)
    assert result.valid < result.enumerated


def test_the_cli_exits_2_with_the_reason(tmp_path: Path) -> None:
    path = spec(tmp_path, "olmoe")
    done = subprocess.run([sys.executable, "-m", "hpdsl.cli", "estimate", str(path), "--tp", "2", "--sp"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr  # a strategy the model cannot run: a usage error
    assert "qk_norm_full" in done.stderr and "Traceback" not in done.stderr
