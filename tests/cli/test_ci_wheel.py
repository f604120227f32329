"""The package is typed (py.typed) for downstream mypy, and the wheel carries py.typed and the JSON schemas."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ci_support import REPO, SCHEMAS

DOWNSTREAM = """\
import hpdsl

registry: hpdsl.Registry = hpdsl.compile_paths(["model.hpf"])
names: list[str] = sorted(registry.models)
"""


def _mypy(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    """Run mypy, as a downstream project would, on one file importing the installed hpdsl."""
    (tmp_path / "use.py").write_text(text, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--python-executable", sys.executable,
                           "use.py"], cwd=tmp_path, capture_output=True, text=True, check=False, timeout=600)


def test_a_downstream_file_type_checks_against_the_installed_package(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    run = _mypy(tmp_path, DOWNSTREAM)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "import-untyped" not in run.stdout
    # The types are hpdsl's own, not Any: a wrong use is reported.
    wrong = _mypy(tmp_path, DOWNSTREAM + "oops: str = hpdsl.compile_paths([])\n")
    assert wrong.returncode == 1
    assert 'Incompatible types in assignment (expression has type "Registry", variable has type "str")' in wrong.stdout


def test_the_wheel_carries_py_typed_and_the_schemas(tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    built = subprocess.run([sys.executable, "-c", "import sys, hatchling.build as b; print(b.build_wheel(sys.argv[1]))",
                            str(tmp_path)], cwd=REPO, capture_output=True, text=True, check=False, timeout=600)
    assert built.returncode == 0, built.stderr
    with zipfile.ZipFile(tmp_path / built.stdout.strip().splitlines()[-1]) as wheel:
        names = set(wheel.namelist())
    assert "hpdsl/py.typed" in names
    assert "hpdsl/_data/registry.schema.json" in names
    for schema in SCHEMAS.glob("*.schema.json"):
        assert f"hpdsl/_data/schemas/{schema.name}" in names
    assert "hpdsl/_data/grammar/hpdsl.lark" in names
    # The standard fields and the table hpdsl.model.fields reads at import (fields/).
    assert {"hpdsl/_data/fields/model.hpf", "hpdsl/_data/fields/model.fields.json"} <= names


def test_py_typed_is_in_the_package() -> None:
    import hpdsl

    assert (Path(hpdsl.__file__).parent / "py.typed").is_file()
