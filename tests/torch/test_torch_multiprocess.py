"""A real 4-rank gloo job, run as cp 2 × ep 2 and then ep 2 × tp 2 (three times: gated attention, MLA, then MLA
with DSA's indexer), and DSA again over cp 2 × ep 2: loss and gradients equal the unsharded model's."""

from __future__ import annotations

import json

import pytest
import torch.multiprocessing as mp
import torch_dist_worker

WORLD = 4


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[dict]:
    """Run the job once; return each rank's measurements of both meshes."""
    root = tmp_path_factory.mktemp("job")
    store, out = root / "store", root / "out"
    store.mkdir()
    out.mkdir()
    mp.spawn(torch_dist_worker.run, args=(WORLD, str(store), str(out)), nprocs=WORLD, join=True)
    return [json.loads((out / f"{rank}.json").read_text()) for rank in range(WORLD)]


def _check_matches_reference(runs: list[dict]) -> None:
    for run in runs:
        assert run["loss"] == pytest.approx(run["expected"], rel=1e-5)
        assert run["worst_grad_error"] < 1e-4
        assert run["local_experts"] == 4  # 8 experts over ep 2
    assert len({round(r["loss"], 6) for r in runs}) == 1


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_cp_and_ep_sharded_model_matches_the_unsharded_one(results) -> None:
    runs = [r["cp_ep"] for r in results]
    _check_matches_reference(runs)
    assert all(r["ring"] and r["dtensors"] == 0 for r in runs)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_tp_and_ep_sharded_model_matches_the_unsharded_one(results) -> None:
    runs = [r["tp_ep"] for r in results]
    _check_matches_reference(runs)
    # 4 heads with their output gates, 16 wide: 128 rows, 64 on each tp rank.
    assert all(r["probe"] == [[128, 64], [64, 64]] and r["dtensors"] > 0 for r in runs)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_mla_split_by_heads_over_tp_matches_the_unsharded_one(results) -> None:
    runs = [r["mla_tp_ep"] for r in results]
    _check_matches_reference(runs)
    # kv_b_proj: 4 kv heads of 16 no-position key + 16 value dims from a 16-wide latent; 2 heads on each tp rank.
    assert all(r["probe"] == [[128, 16], [64, 16]] and r["dtensors"] > 0 for r in runs)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_dsa_over_tp_matches_the_unsharded_one(results) -> None:
    runs = [r["dsa_tp_ep"] for r in results]
    _check_matches_reference(runs)  # the indexer's gradients too: its KL target summed over the tp ranks' heads
    # wq_b: 2 index heads of 16 from the 32-wide query latent, replicated: whole on each tp rank.
    assert all(r["probe"] == [[32, 32], [32, 32]] for r in runs)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_dsa_over_cp_matches_the_unsharded_one(results) -> None:
    runs = [r["dsa_cp_ep"] for r in results]
    _check_matches_reference(runs)  # each cp rank's queries select among the gathered keys of the whole sequence
    assert all(r["ring"] and r["dtensors"] == 0 for r in runs)
