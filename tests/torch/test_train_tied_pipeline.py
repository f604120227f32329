"""A head tied to the embedding under pp: the last stage multiplies by its own copy of the table, whose
gradient is summed with the first stage's (hpdsl/torch/pipeline.py `sum_embedding_grads`), against one
process and the estimate."""

from __future__ import annotations

import pytest

from train_batch import pooled_results
from train_support import ROOT, matches_one_process_and_the_estimate

LLAMA_TIED = [str(ROOT / "examples" / "llama2_7b.hpf"), *(f"--set={pair}" for pair in (
    "layers=2", "hidden=64", "heads=4", "kv_heads=2", "vocab=128", "ffn_width=96", "tie_embeddings=true"))]


FOUR = {"llama-tied-tp2-pp2": [*LLAMA_TIED, "--pp", "2", "--tp", "2", "--sp", "--global-batch", "2", "--nproc", "4",
                                "--steps", "3"]}
"""`hpdsl train ARGS --validate --json`, in one launch with tests/torch/test_train_pipeline.py's 4-process runs
(tests/torch/train_batch.py; tests/torch/test_trainer.py holds a batched run equal to the command's)."""
four = pooled_results("four", "tied-pipeline", FOUR)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_tied_head_under_tp2_pp2_matches_one_process_and_the_estimate(four: dict[str, dict]) -> None:
    result = four["llama-tied-tp2-pp2"]
    assert {(r["coords"]["pp"], r["coords"]["tp"]) for r in result["ranks"]} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    # The last stage holds its vocabulary-split copy of the table, priced as an untied head's; the copy's
    # gradient, summed with the first stage's, is the whole table's (lookups and head).
    matches_one_process_and_the_estimate(result)
