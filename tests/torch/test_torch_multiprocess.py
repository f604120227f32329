"""A real 4-rank gloo job (cp 2 × ep 2): the built model's loss and gradients equal the unsharded model's."""

from __future__ import annotations

import json

import pytest
import torch.multiprocessing as mp
import torch_dist_worker

WORLD = 4


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cp_and_ep_sharded_model_matches_the_unsharded_one(tmp_path) -> None:
    store, out = tmp_path / "store", tmp_path / "out"
    store.mkdir()
    out.mkdir()
    mp.spawn(torch_dist_worker.run, args=(WORLD, str(store), str(out)), nprocs=WORLD, join=True)
    results = [json.loads((out / f"{rank}.json").read_text()) for rank in range(WORLD)]
    for result in results:
        assert result["loss"] == pytest.approx(result["expected"], rel=1e-5)
        assert result["worst_grad_error"] < 1e-4
        assert result["local_experts"] == 4  # 8 experts over ep 2
    assert len({round(r["loss"], 6) for r in results}) == 1
