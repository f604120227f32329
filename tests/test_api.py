"""The public API: compiling returns a Registry or raises one SpecError, and every error says what is wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hpdsl
import hpdsl.cost
from hpdsl.api import check_paths, check_sources, write_registry
from hpdsl.diagnostics import Source
from hpdsl.errors import SHOWN_DIAGNOSTICS, SHOWN_LOAD_ERRORS, LoadError, SpecError
from hpdsl.registry import Registry

WARNED = """\
family warned {
  factory "pkg.mod:A"
  variant local  "pkg.mod:Local" default
  variant orphan "pkg.mod:Orphan"
}
"""


def unknown_profiles(count: int) -> str:
    """Return `count` models, each naming a profile nobody declares (one error each)."""
    return "".join(f"model m{i} : no_such_profile {{\n  hidden 8  layers 2  heads 2  vocab 10\n}}\n"
                   for i in range(count))


# --------------------------------------------------------------------------
# Compiling
# --------------------------------------------------------------------------


def test_compile_sources_returns_a_registry_carrying_its_warnings() -> None:
    registry = hpdsl.compile_sources([Source("warned.hpf", WARNED)])
    assert isinstance(registry, Registry)
    assert registry.family("warned").name == "warned"
    assert [w.code for w in registry.warnings] == ["variant-unreachable"]
    assert registry.warnings[0].span.file == "warned.hpf"
    # The same run, returned: the CLI's view of it.
    result = check_sources([Source("warned.hpf", WARNED)])
    assert result.ok and result.registry == registry
    assert result.warnings == registry.warnings


def test_a_copy_keeps_the_warnings_and_equality_ignores_them() -> None:
    registry = hpdsl.compile_sources([Source("warned.hpf", WARNED)])
    family = registry.family("warned")
    assert registry.with_family(family).warnings == registry.warnings
    assert Registry(registry.ir) == registry


def test_compile_paths_returns_the_registry_load_registry_reads(tmp_path: Path) -> None:
    spec = tmp_path / "warned.hpf"
    spec.write_text(WARNED, encoding="utf-8")
    registry = hpdsl.compile_paths([spec])
    write_registry(registry, tmp_path / "registry.json")
    loaded = hpdsl.load_registry(tmp_path / "registry.json")
    assert loaded == registry
    assert loaded.warnings == ()


def test_errors_raise_one_spec_error_with_every_diagnostic() -> None:
    with pytest.raises(SpecError) as caught:
        hpdsl.compile_sources([Source("bad.hpf", unknown_profiles(7))])
    error = caught.value
    assert [d.code for d in error.diagnostics] == ["unknown-profile"] * 7
    assert "bad.hpf" in error.sources
    lines = str(error).splitlines()
    assert lines[0] == error.message == "the specs have 7 errors"
    assert lines[1:1 + SHOWN_DIAGNOSTICS] == [
        f"  bad.hpf:{1 + 3 * i}:{11 + len(str(i))}: error[unknown-profile]: {error.diagnostics[i].message}"
        for i in range(SHOWN_DIAGNOSTICS)]
    assert lines[-1] == f"  ... and {7 - SHOWN_DIAGNOSTICS} more"


def test_a_short_spec_error_lists_all_and_no_more_line() -> None:
    with pytest.raises(SpecError) as caught:
        hpdsl.compile_sources([Source("bad.hpf", unknown_profiles(1))])
    lines = str(caught.value).splitlines()
    assert lines == ["the specs have 1 error",
                     f"  bad.hpf:1:12: error[unknown-profile]: {caught.value.diagnostics[0].message}"]


def test_a_syntax_error_says_where_in_its_string() -> None:
    with pytest.raises(SpecError) as caught:
        hpdsl.parse("family tiny {\n  factory\n", "broken.hpf")
    assert "\n  broken.hpf:" in str(caught.value)
    assert "error[" in str(caught.value)


def test_check_paths_returns_errors_instead_of_raising(tmp_path: Path) -> None:
    spec = tmp_path / "bad.hpf"
    spec.write_text(unknown_profiles(2), encoding="utf-8")
    result = check_paths([spec])
    assert result.registry is None and not result.ok
    assert len(result.errors) == 2
    with pytest.raises(SpecError, match="the specs have 2 errors"):
        result.unwrap()


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------


def test_a_load_error_shows_the_json_paths_it_found(tmp_path: Path) -> None:
    data = json.loads(hpdsl.compile_sources([]).to_json())
    profile = next(iter(data["profiles"]))
    for i in range(SHOWN_LOAD_ERRORS + 2):
        data["profiles"][profile][f"bogus_{i:02d}"] = 1
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(LoadError) as caught:
        hpdsl.load_registry(path)
    error = caught.value
    assert len(error.errors) == SHOWN_LOAD_ERRORS + 2
    lines = str(error).splitlines()
    assert lines[0] == error.message
    assert lines[1:1 + SHOWN_LOAD_ERRORS] == [f"  {e}" for e in error.errors[:SHOWN_LOAD_ERRORS]]
    assert lines[1].startswith(f"  $.profiles.{profile}.bogus_")
    assert lines[-1] == "  ... and 2 more"


def test_the_cli_prints_the_message_once_and_the_diagnostics_in_full(tmp_path: Path) -> None:
    (tmp_path / "bad.hpf").write_text(unknown_profiles(1), encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "hpdsl", "stack", "bad.hpf"], cwd=tmp_path,
                         capture_output=True, text=True, check=False, env={**os.environ}, timeout=120)
    assert run.returncode == 1
    assert run.stderr.count("bad.hpf:1:12: error[unknown-profile]") == 1
    assert run.stderr.rstrip().endswith("hpdsl: the specs have 1 error")


# --------------------------------------------------------------------------
# hpdsl.cost
# --------------------------------------------------------------------------


def test_hpdsl_cost_exports_the_estimator() -> None:
    from hpdsl.cost.estimate import estimate
    from hpdsl.cost.search import search
    from hpdsl.model.strategy import Strategy

    assert hpdsl.cost.estimate is estimate
    assert hpdsl.cost.search is search
    assert hpdsl.cost.Strategy is Strategy
    assert callable(hpdsl.cost.parameters) and callable(hpdsl.cost.bind)
    assert {"estimate", "search", "Strategy", "parameters", "bind"} <= set(hpdsl.cost.__all__)


def test_the_cost_names_price_a_compiled_model() -> None:
    from hpdsl.cost import Strategy, bind, estimate, parameters

    registry = hpdsl.compile_paths([Path(__file__).resolve().parents[1] / "examples" / "llama3_8b.hpf"])
    model = registry.model("llama3_8b")
    cost_model = bind(model, registry.profile(model.profile), families=registry.families)
    assert parameters(cost_model).total > 8_000_000_000
    priced = estimate(cost_model, Strategy(tp=8, global_batch=8, seq_len=1024))
    assert priced.memory.peak_bytes > 0 and priced.step_time_s > 0


def test_the_registry_is_the_checks_lowering_not_a_second_one() -> None:
    from hpdsl.check import check_lowering
    from hpdsl.ir.lower import lower_registry
    from hpdsl.loader import load_paths

    loaded = load_paths([Path(__file__).resolve().parents[1] / "examples" / "mixtral_8x7b.hpf"], stdlib=True)
    checked = check_lowering(loaded.files)
    assert not any(d.is_error for d in checked.diagnostics)
    reused = lower_registry(checked.scope, loaded.sources, lowered=checked.clean.lowered())
    assert reused == lower_registry(checked.scope, loaded.sources)  # the same registry as lowering it all again
    for name, bound in checked.clean.models.items():
        assert reused.models[name] is bound.model  # taken as the check lowered it
    for name, family in checked.clean.families.items():
        assert reused.families[name] is family
