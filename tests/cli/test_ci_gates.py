"""`hpdsl diff --exit-code` and the budgets (`--max-params`, `--max-peak-gib`, `--max-step-seconds`) as CI gates."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_support import LLAMA, hpdsl, json_of, variant


def test_diff_exit_code_is_0_for_equal_specs_and_1_when_they_differ(tmp_path: Path) -> None:
    same = hpdsl("diff", LLAMA, LLAMA, "--exit-code")
    assert same.returncode == 0, same.stderr
    assert "unchanged: llama3_8b" in same.stdout
    shorter = variant(tmp_path, "layers 32 ", "layers 30 ")
    changed = hpdsl("diff", LLAMA, str(shorter), "--exit-code")
    assert changed.returncode == 1, changed.stderr
    assert "layers       32 -> 30" in changed.stdout
    # Without the flag a difference is still a report, not a failure.
    assert hpdsl("diff", LLAMA, str(shorter)).returncode == 0


def test_diff_exit_code_keeps_the_json_and_counts_added_models(tmp_path: Path) -> None:
    renamed = variant(tmp_path, "model llama3_8b", "model llama3_8b_copy")
    data = json_of("diff", LLAMA, str(renamed), "--exit-code", "--json", code=1)
    assert data["added"] == ["llama3_8b_copy"] and data["removed"] == ["llama3_8b"]


def test_estimate_budgets_exit_1_naming_each_budget_exceeded() -> None:
    run = hpdsl("estimate", LLAMA, "--tp", "8", "--max-params", "7000000000", "--max-peak-gib", "10",
                "--max-step-seconds", "1000")
    assert run.returncode == 1
    assert "parameters of llama3_8b" in run.stdout  # the report is printed all the same
    over = [line for line in run.stderr.splitlines() if line.startswith("hpdsl: over budget:")]
    assert len(over) == 2, run.stderr
    assert over[0].startswith("hpdsl: over budget: --max-params 7,000,000,000: model llama3_8b has 8,030,261,248")
    assert over[1].startswith("hpdsl: over budget: --max-peak-gib 10: model llama3_8b has")
    assert hpdsl("estimate", LLAMA, "--tp", "8", "--max-params", "9000000000", "--max-peak-gib", "80",
                 "--max-step-seconds", "1000").returncode == 0


def test_estimate_budget_in_json_mode_keeps_stdout_one_json_object() -> None:
    data = json_of("estimate", LLAMA, "--tp", "8", "--max-step-seconds", "0.001", "--json", code=1)
    assert data["step_time_s"] > 0.001


def test_search_budgets_check_the_fastest_strategy() -> None:
    fast = json_of("search", LLAMA, "--devices", "8", "--top", "1", "--json")
    step = fast["top"][0]["step_time_s"]
    run = hpdsl("search", LLAMA, "--devices", "8", "--top", "1", "--max-step-seconds", f"{step / 2}")
    assert run.returncode == 1
    assert "--max-step-seconds" in run.stderr and "the fastest strategy (tp" in run.stderr
    assert hpdsl("search", LLAMA, "--devices", "8", "--top", "1",
                 "--max-step-seconds", f"{step * 2}").returncode == 0


def test_search_with_nothing_that_fits_fails_a_memory_budget() -> None:
    run = hpdsl("search", LLAMA, "--devices", "1", "--memory-gib", "1", "--max-peak-gib", "1")
    assert run.returncode == 1
    assert "hpdsl: over budget: --max-peak-gib: no strategy fits 1 devices" in run.stderr


def test_diff_budgets_check_the_new_side(tmp_path: Path) -> None:
    wider = variant(tmp_path, "layers 32 ", "layers 40 ")
    run = hpdsl("diff", LLAMA, str(wider), "--max-params", "9000000000")
    assert run.returncode == 1
    assert f"--max-params 9,000,000,000: model llama3_8b of {wider} has" in run.stderr
    peak = hpdsl("diff", LLAMA, str(wider), "--tp", "8", "--max-peak-gib", "1")
    assert peak.returncode == 1 and "GiB peak memory per device" in peak.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("diff", LLAMA, LLAMA, "--max-peak-gib", "10"), "--max-peak-gib needs strategy flags"),
    (("estimate", LLAMA, "--max-params", "-1"), "Invalid value for '--max-params'"),
    (("estimate", LLAMA, "--max-peak-gib", "lots"), "Invalid value for '--max-peak-gib'"),
])
def test_a_budget_that_cannot_be_checked_is_a_usage_error(args: tuple[str, ...], message: str) -> None:
    run = hpdsl(*args)
    assert run.returncode == 2
    assert message in run.stderr and "Traceback" not in run.stderr
