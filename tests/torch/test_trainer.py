"""`hpdsl train` as a trainer on CPU gloo, the code path CUDA takes: precision as priced, clipping on every mesh,
checkpoints that resume exactly, a token file learned, and a scaled 8B model no rank holds whole."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from train_batch import shared, train_batch
from train_support import MIXTRAL, MIXTRAL_SMALL, ROOT, hpdsl, static_bytes_equal, train_json

LLAMA3_8B = str(ROOT / "examples" / "llama3_8b.hpf")
LLAMA_SMALL = [f"--set={pair}" for pair in ("layers=2", "hidden=64", "heads=4", "kv_heads=2", "vocab=128",
                                            "ffn_width=96")]
EXPERTS = ("--dp", "2", "--ep", "2", "--zero", "os+grad+params", "--nproc", "2")
RESUMED = (*EXPERTS, "--steps", "4", "--warmup", "1", "--schedule", "cosine", "--lr", "3e-3")
"""The run that is checkpointed and resumed."""
SCALED_8B = [f"--set={pair}" for pair in ("layers=4", "hidden=1024", "heads=8", "kv_heads=2", "ffn_width=3584",
                                          "vocab=16032")]
"""Llama-3-8B's shape (GQA 4:1, SwiGLU at 3.5x, head_dim 128), scaled to 4 layers and a 1/4-wide stream."""
TOKEN_FILES = {"bin-dp2": (".bin", "--dp"), "npy-cp2": (".npy", "--cp")}


def _token_file(path: Path) -> Path:
    """Write a token file with a repeating pattern (period 16: each token tells the next); return it."""
    tokens = (np.arange(40_000) * 7 % 16).astype(np.uint16)
    if path.suffix == ".npy":
        np.save(path, tokens)
    else:
        tokens.tofile(path)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Return the results of this file's 2-process runs without --validate, by name, from one launch
    (tests/torch/train_batch.py); "resume-whole" is the resumed test's uninterrupted run again."""
    def make() -> dict[str, dict]:
        folder = tmp_path_factory.mktemp("trainer")
        return train_batch({
            "bf16-mixed": [MIXTRAL, *MIXTRAL_SMALL, *EXPERTS, "--precision", "bf16-mixed", "--clip", "0.5", "--steps", "3"],
            "clip-tp2": [MIXTRAL, *MIXTRAL_SMALL, "--tp", "2", "--sp", "--zero", "os+grad+params", "--nproc", "2",
                         "--clip", "0.01", "--lr", "1e-2", "--steps", "2"],
            **{name: [LLAMA3_8B, *LLAMA_SMALL, mesh, "2", "--zero", "os+grad+params", "--nproc", "2", "--data",
                      str(_token_file(folder / f"tokens{suffix}")), "--steps", "30", "--lr", "1e-2"]
               for name, (suffix, mesh) in TOKEN_FILES.items()},
            "scaled-8b": [LLAMA3_8B, *SCALED_8B, "--dp", "2", "--zero", "os+grad+params", "--nproc", "2", "--steps", "1",
                          "--seq-len", "64"],
            "resume-whole": [MIXTRAL, *MIXTRAL_SMALL, *RESUMED, "--checkpoint", str(folder / "saves"),
                             "--checkpoint-every", "2"],
        }, validate=False)

    return shared("trainer-2", tmp_path_factory, make)


def _metrics_are_per_step(result: dict, steps: int) -> None:
    assert len(result["loss"]) == len(result["grad_norm"]) == len(result["metrics"]) == steps
    for m in result["metrics"]:
        assert m["grad_norm"] > 0 and m["tokens_per_s"] > 0 and m["step_time_s"] > 0 and m["mfu"] >= 0
        assert m["estimated_mfu"] > 0 and len(m["peak_memory_bytes"]) == len(result["ranks"])
        assert all(peak > 0 for peak in m["peak_memory_bytes"])


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_bf16_mixed_dp2_ep2_holds_the_bytes_priced_and_clips_over_both_meshes(runs: dict[str, dict]) -> None:
    result = runs["bf16-mixed"]
    static_bytes_equal(result)  # fp32 shards, gradients and moments: 4 + 4 + 8 bytes per parameter
    _metrics_are_per_step(result, 3)
    assert all(math.isfinite(loss) for loss in result["loss"])
    assert "reference_loss" not in result  # no --validate: no one-process run


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_clip_under_tp2_mixes_tensors_and_dtensors(runs: dict[str, dict]) -> None:
    clipped = runs["clip-tp2"]
    _metrics_are_per_step(clipped, 2)
    assert clipped["grad_norm"][0] > 0.01  # the norm is the one before clipping, as torch reports it


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_run_resumed_from_step_2_has_the_uninterrupted_runs_losses(tmp_path: Path, runs: dict[str, dict]) -> None:
    flags = RESUMED
    whole = train_json(MIXTRAL, *MIXTRAL_SMALL, *flags, "--checkpoint", str(tmp_path / "a"),
                       "--checkpoint-every", "2", validate=False)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["step-2", "step-4"]
    # The same run in this file's batched launch, after five others, trained exactly as `hpdsl train` did (its
    # timings and the JSON's schema_version aside): the batched runs of tests/torch/ stand for the command's.
    batched, apart = runs["resume-whole"], ("metrics", "schema_version")
    assert {k: v for k, v in batched.items() if k not in apart} == {k: v for k, v in whole.items() if k not in apart}
    assert [sorted(m) for m in batched["metrics"]] == [sorted(m) for m in whole["metrics"]]
    (tmp_path / "b").mkdir()
    shutil.copytree(tmp_path / "a" / "step-2", tmp_path / "b" / "step-2")
    resumed = train_json(MIXTRAL, *MIXTRAL_SMALL, *flags, "--checkpoint", str(tmp_path / "b"), "--resume",
                         validate=False)
    assert resumed["loss"] == pytest.approx(whole["loss"][2:], rel=1e-6)
    assert resumed["grad_norm"] == pytest.approx(whole["grad_norm"][2:], rel=1e-5)
    # A save written for another strategy or model is refused before anything runs, both named (exit 1).
    dense = ("--dp", "2", "--zero", "os+grad+params", "--nproc", "2", "--steps", "4")
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, *dense, "--checkpoint", str(tmp_path / "a"), "--resume")
    assert code == 1 and "step-4 was saved for model mixtral_8x7b" in output, output
    assert "ep 2 saved, 1 now" in output and "Traceback" not in output
    code, output = hpdsl("train", LLAMA3_8B, *LLAMA_SMALL, *dense, "--checkpoint", str(tmp_path / "a"), "--resume")
    assert code == 1 and "'mixtral_8x7b' saved, 'llama3_8b' now" in output, output


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", list(TOKEN_FILES))
def test_a_token_file_with_a_repeating_pattern_is_learned(runs: dict[str, dict], name: str) -> None:
    # Under cp 2 each rank reads its half of the same sequences (tests/torch/test_train_data.py holds the chunks).
    mesh = TOKEN_FILES[name][1]
    result = runs[name]
    assert {r["coords"]["cp" if mesh == "--cp" else "dp_shard"] for r in result["ranks"]} == {0, 1}
    losses = result["loss"]
    assert losses[0] > 4.0 and losses[-1] < 0.5 * losses[0], losses


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_scaled_8b_model_trains_without_any_rank_holding_it_whole(runs: dict[str, dict]) -> None:
    result = runs["scaled-8b"]  # SCALED_8B: no rank holds it whole
    static_bytes_equal(result)
    whole = sum(rank["measured"]["params_bytes"] for rank in result["ranks"])  # ZeRO-3: the shards add up
    for rank in result["ranks"]:
        measured = rank["measured"]
        assert measured["params_bytes"] == whole // 2
        assert measured["materialize_peak_bytes"] < 0.75 * whole  # its shards and one layer, never the model


def test_parallelize_never_trains_fp32_when_the_strategy_says_bf16_mixed() -> None:
    from hpdsl.model.strategy import Strategy
    from hpdsl.errors import BuildError
    from hpdsl.ir.overrides import apply_sets
    from hpdsl.torch import build_model, parallelize
    from hpdsl.torch.parallelize import refusals
    from torch_support import examples_registry

    # One data-parallel rank at zero none: FSDP2 over a one-rank mesh casts (search --run picks such strategies).
    assert refusals(Strategy(precision="bf16-mixed", zero="none")) == ()
    assert any("FSDP2 always shards" in r for r in refusals(Strategy(precision="bf16-mixed", zero="none", dp=2)))
    assert any("trains fp32 or bf16-mixed" in r for r in refusals(Strategy(precision="fp8-mixed",
                                                                          zero="os+grad+params")))
    registry = examples_registry()
    small = apply_sets(registry.models["llama3_8b"], {"layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2,
                                                      "vocab": 128, "ffn_width": 96})
    model = build_model(small, registry=registry)
    for zero in ("os+grad+params", "none"):
        with pytest.raises(BuildError, match="at bf16-mixed needs the job's mesh"):
            parallelize(model, Strategy(precision="bf16-mixed", zero=zero))
    assert parallelize(model, Strategy(precision="fp32")) is model  # one process, fp32: nothing to shard
