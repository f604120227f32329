"""etp without ep: every rank holds every expert at 1/etp of its width (the ep variant over a one-rank ep axis),
against one process and the estimate, clipped by --clip as one process is."""

from __future__ import annotations

import pytest

from train_batch import pooled_results
from train_support import MIXTRAL, MIXTRAL_SMALL, clipped_norms_match, matches_one_process_and_the_estimate


TWO = {"mixtral-dp2-etp2-clipped": [MIXTRAL, *MIXTRAL_SMALL, "--dp", "2", "--etp", "2", "--zero", "os+grad+params",
                                    "--nproc", "2", "--steps", "3", "--clip", "0.5"]}
"""`hpdsl train ARGS --validate --json`, in one launch with tests/torch/test_train.py's 2-process run
(tests/torch/train_batch.py; tests/torch/test_trainer.py holds a batched run equal to the command's)."""
two = pooled_results("two", "etp-alone", TWO)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_dp2_etp2_without_ep_matches_one_process_and_the_estimate_clipped(two: dict[str, dict]) -> None:
    result = two["mixtral-dp2-etp2-clipped"]
    # --clip: the experts' etp-split gradients and the dense ones' norms combined, as one process's norm.
    clipped_norms_match(result, 0.5)
    assert [(r["coords"]["ep"], r["coords"]["etp"]) for r in result["ranks"]] == [(0, 0), (0, 1)]
    # All 4 experts at half their width on each rank; their ZeRO group dp·cp·tp/(ep·etp) is 1.
    matches_one_process_and_the_estimate(result)
