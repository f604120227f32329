"""`--device`, `--recompute` and `--zero` list their values: `--help`, a wrong value and shell completion
name them (`--device` also takes a .hpf file declaring a device: hpdsl/cli/options.py's DeviceType)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_support import LLAMA, hpdsl
from hpdsl.cli.options import DEVICES, ESTIMATE_FLAGS
from hpdsl.cost.facts.devices import DEVICES as SHIPPED_DEVICES
from hpdsl.cost.facts.machines import normal
from hpdsl.model.strategy import RECOMPUTE as STRATEGY_RECOMPUTE
from hpdsl.model.strategy import ZERO as STRATEGY_ZERO


def test_the_choices_are_the_estimators_own_names() -> None:
    kinds = {name: kind for _flag, name, kind, _help in ESTIMATE_FLAGS}
    assert list(DEVICES.choices) == list(SHIPPED_DEVICES)  # the names devices/*.hpf declares, compiled
    assert DEVICES.aliases and all(normal(a) in SHIPPED_DEVICES for a in DEVICES.aliases)
    assert list(kinds["recompute"].choices) == list(STRATEGY_RECOMPUTE)
    assert list(kinds["zero"].choices) == list(STRATEGY_ZERO)


@pytest.mark.parametrize("command", ["estimate", "search", "diff", "train"])
def test_help_lists_the_devices(command: str) -> None:
    run = hpdsl(command, "--help")
    assert run.returncode == 0
    assert ("a100_80gb|ascend910b|b200|cpu|h100_sxm|h200|mi300x|a100|h100|FILE.hpf"
            in run.stdout.replace("\n", "").replace(" ", ""))


@pytest.mark.parametrize(("flag", "listed"), [
    ("--device", "'a100_80gb', 'ascend910b', 'b200', 'cpu', 'h100_sxm', 'h200', 'mi300x', 'a100', 'h100', "
                 "nor a .hpf file"),
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


@pytest.mark.parametrize(("flag", "expected"), [("--device", ["a100_80gb", "ascend910b", "b200", "cpu", "h100_sxm",
                                                             "h200", "mi300x", "a100", "h100"]),
                                                ("--zero", ["none", "os", "os+grad", "os+grad+params"])])
def test_shell_completion_lists_the_values(flag: str, expected: list[str]) -> None:
    run = hpdsl(env={"_HPDSL_COMPLETE": "bash_complete", "COMP_WORDS": f"hpdsl estimate {flag} ",
                     "COMP_CWORD": "3"})
    assert run.returncode == 0, run.stderr
    assert [line.split(",", 1)[1] for line in run.stdout.splitlines()] == expected


def test_a_device_file_is_taken_beside_the_names(tmp_path: Path) -> None:
    shipped = Path(__file__).resolve().parents[2] / "devices" / "h200.hpf"
    mine = tmp_path / "mine.hpf"
    mine.write_text(shipped.read_text(encoding="utf-8").replace("device h200 {", "device mine {"), encoding="utf-8")
    run = hpdsl("estimate", LLAMA, "--tp", "8", "--device", str(mine), "--json")
    assert run.returncode == 0, run.stderr
    assert '"device": "mine"' in run.stdout and str(mine) in run.stdout


def test_completion_narrows_to_the_names_a_prefix_starts() -> None:
    run = hpdsl(env={"_HPDSL_COMPLETE": "bash_complete", "COMP_WORDS": "hpdsl estimate --device h1",
                     "COMP_CWORD": "3"})
    assert run.returncode == 0, run.stderr
    assert [line.split(",", 1)[1] for line in run.stdout.splitlines()] == ["h100_sxm", "h100"]
