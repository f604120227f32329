"""`--device`, `--recompute` and `--zero` are choices: `--help`, a wrong value and shell completion list them."""

from __future__ import annotations

import pytest

from ci_support import LLAMA, hpdsl
from hpdsl.cli.options import DEVICES, ESTIMATE_FLAGS
from hpdsl.cost.facts.devices import DEVICES as SHIPPED_DEVICES
from hpdsl.model.strategy import RECOMPUTE as STRATEGY_RECOMPUTE
from hpdsl.model.strategy import ZERO as STRATEGY_ZERO


def test_the_choices_are_the_estimators_own_names() -> None:
    kinds = {name: kind for _flag, name, kind, _help in ESTIMATE_FLAGS}
    assert list(DEVICES.choices) == list(SHIPPED_DEVICES)
    assert list(kinds["recompute"].choices) == list(STRATEGY_RECOMPUTE)
    assert list(kinds["zero"].choices) == list(STRATEGY_ZERO)


@pytest.mark.parametrize("command", ["estimate", "search", "diff", "train"])
def test_help_lists_the_devices(command: str) -> None:
    run = hpdsl(command, "--help")
    assert run.returncode == 0
    assert "h100|h200|a100|mi300x|ascend910b" in run.stdout.replace("\n", "").replace(" ", "")


@pytest.mark.parametrize(("flag", "listed"), [
    ("--device", "'h100', 'h200', 'a100', 'mi300x', 'ascend910b'"),
    ("--recompute", "'none', 'selective', 'full'"),
    ("--zero", "'none', 'os', 'os+grad', 'os+grad+params'"),
])
def test_a_wrong_value_is_a_usage_error_listing_the_choices(flag: str, listed: str) -> None:
    run = hpdsl("estimate", LLAMA, flag, "foo")
    assert run.returncode == 2
    assert f"Invalid value for '{flag}'" in run.stderr and listed in run.stderr


def test_a_device_name_is_case_insensitive() -> None:
    run = hpdsl("estimate", LLAMA, "--tp", "8", "--device", "H200", "--json")
    assert run.returncode == 0 and '"device": "h200"' in run.stdout


@pytest.mark.parametrize(("flag", "expected"), [("--device", ["h100", "h200", "a100", "mi300x", "ascend910b"]),
                                                ("--zero", ["none", "os", "os+grad", "os+grad+params"])])
def test_shell_completion_lists_the_values(flag: str, expected: list[str]) -> None:
    run = hpdsl(env={"_HPDSL_COMPLETE": "bash_complete", "COMP_WORDS": f"hpdsl estimate {flag} ",
                     "COMP_CWORD": "3"})
    assert run.returncode == 0, run.stderr
    assert [line.split(",", 1)[1] for line in run.stdout.splitlines()] == expected
