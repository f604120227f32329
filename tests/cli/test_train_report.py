"""`hpdsl train`'s readable report: a CPU's tiny MFU is shown, not rounded to zero."""

from __future__ import annotations

from hpdsl.cli.train_report import percent, render_train
from hpdsl.model.strategy import Strategy

_PARTS = {"params_bytes": 1_000, "grads_bytes": 1_000, "optimizer_bytes": 2_000, "activation_peak_bytes": 500}


def test_percent_keeps_two_significant_digits_of_a_small_share() -> None:
    assert percent(0.4) == "40.00%"
    assert percent(0.0123) == "1.23%"
    assert percent(0.00004) == "0.004%"
    assert percent(0.0000567) == "0.0057%"
    assert percent(0.0) == "0.00%"


def test_report_row_shows_a_cpu_mfu_beside_its_estimate() -> None:
    """A step at 0.0031 % MFU measured and 0.0042 % estimated reads so, not 0.00 % (0.00 %)."""
    result = {"loss": [2.5], "device": "cpu",
              "metrics": [{"step": 0, "grad_norm": 1.0, "tokens_per_s": 900.0, "mfu": 3.1e-5,
                           "estimated_mfu": 4.2e-5}],
              "ranks": [{"rank": 0, "coords": {"dp": 0}, "measured": dict(_PARTS), "estimated": dict(_PARTS)}]}
    report = render_train("tiny", Strategy(seq_len=64), result)
    row = report.splitlines()[2]
    assert row.endswith("0.0031% (0.0042%)"), row
