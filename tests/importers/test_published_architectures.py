"""Today's state of each published config.json in tests/data/hf/, pinned: exact, or refused cleanly.

Each file tests/importers/hf_configs.py FILES names is copied byte for byte as config.json and run
through the real CLI. A config today's importer prices (not in REFUSED_TODAY) imports, and
`hpdsl estimate --json` gives params.total and params.active equal to transformers' count of the
same config on the meta device, as tests/data/hf/counts.json records it (bench/hf_counts.py). A
config in REFUSED_TODAY exits 1 with one message naming the key or construct it lacks and no
traceback. A change to the importer that moves a config from one state to the other shows here
as a test to update, the tables being the current state. No transformers here: the slow test
recounts counts.json with bench/hf_counts.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.importers.hf_configs import DATA, FILES, REFUSED_TODAY

ROOT = Path(__file__).resolve().parents[2]
COUNTS: dict[str, Any] = json.loads((DATA / "counts.json").read_text(encoding="utf-8"))
EXACT = sorted(set(FILES) - set(REFUSED_TODAY))


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _import(name: str, tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`hpdsl import-hf` of the published file, copied byte for byte as the user's config.json."""
    shutil.copyfile(DATA / FILES[name][0], tmp_path / "config.json")
    return _hpdsl("import-hf", "config.json", "--name", name, "-o", f"{name}.hpf", *flags, cwd=tmp_path)


def _assert_exact(name: str, tmp_path: Path) -> None:
    estimate = _hpdsl("estimate", f"{name}.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    params = json.loads(estimate.stdout)["params"]
    expected = COUNTS["counts"][name]
    # A composite ("vl") config is priced as its text model: held to transformers' text model class.
    total, active = ("text_total", "text_active") if "text_total" in expected else ("total", "active")
    assert (params["total"], params["active"]) == (expected[total], expected[active])


def test_every_file_has_a_state_and_a_count() -> None:
    """The tables and the data agree: every file is named, every refusal is a file, every file counted."""
    assert sorted(FILES) == sorted(p.stem for p in DATA.glob("*.json") if p.name != "counts.json")
    assert set(REFUSED_TODAY) <= set(FILES)
    assert sorted(COUNTS["counts"]) == sorted(FILES)


@pytest.mark.parametrize("name", EXACT)
def test_published_config_imports_and_is_exact(name: str, tmp_path: Path) -> None:
    imported = _import(name, tmp_path)
    assert imported.returncode == 0, imported.stderr
    _assert_exact(name, tmp_path)


@pytest.mark.parametrize("name", sorted(REFUSED_TODAY))
def test_published_config_refused_today_is_refused_cleanly(name: str, tmp_path: Path) -> None:
    refused = _import(name, tmp_path)
    assert refused.returncode == 1, (refused.returncode, refused.stderr)
    assert REFUSED_TODAY[name] in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and refused.stderr.startswith("hpdsl: "), refused.stderr
    assert not (tmp_path / f"{name}.hpf").exists()


@pytest.mark.slow
def test_counts_json_is_what_transformers_counts() -> None:
    """bench/hf_counts.py --check: the installed transformers recounts every file as counts.json holds."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if transformers.__version__ != COUNTS["transformers"]:
        pytest.skip(f"counts.json is transformers {COUNTS['transformers']}'s; {transformers.__version__} installed")
    checked = subprocess.run([sys.executable, str(ROOT / "bench" / "hf_counts.py"), "--check"], cwd=ROOT,
                             capture_output=True, text=True, timeout=900)
    assert checked.returncode == 0, checked.stdout + checked.stderr
