"""registry.json: goldens and the shipped registry load back; lookups, load errors, schema, imports.

The golden registries themselves are written by tests/test_golden.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import attrs
import jsonschema
import pytest
from goldens import compile_inputs

from hpdsl.errors import HpdslError, LoadError, UnknownNameError
from hpdsl.ir.convert import registry_to_json
from hpdsl.ir.nodes import SCHEMA_VERSION, FamilyIR
from hpdsl.ir.schema import registry_schema, render_schema
from hpdsl.registry import Registry, load_registry

REPO = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden" / "registry"
SCHEMA_FILE = REPO / "docs" / "registry.schema.json"
TINY = GOLDEN / "tiny.json"  # tests/test_golden.py keeps it: registry.json of golden/registry/tiny/

# Every registry.json the golden tests keep: the registry stage's and the IR stage's.
GOLDEN_REGISTRIES = sorted([*GOLDEN.glob("*.json"), *(GOLDEN.parent / "ir").glob("*.json")])


@pytest.fixture(scope="module")
def shipped() -> str:
    """Return registry.json of the standard library and every example."""
    compiled = compile_inputs([REPO / "examples"], stdlib=True)
    assert compiled.registry is not None, compiled.diagnostics
    return registry_to_json(compiled.registry)


# --------------------------------------------------------------------------
# Golden registries load and write back
# --------------------------------------------------------------------------


@pytest.mark.parametrize("path", GOLDEN_REGISTRIES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_registry_loads_and_writes_back_identically(path: Path) -> None:
    registry = load_registry(path)
    assert registry.to_json() == path.read_text(encoding="utf-8")
    assert registry.schema_version == SCHEMA_VERSION


def test_shipped_registry_loads_and_writes_back_identically(shipped: str, tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    path.write_text(shipped, encoding="utf-8")
    assert load_registry(path).to_json() == shipped


# --------------------------------------------------------------------------
# The JSON Schema
# --------------------------------------------------------------------------


def test_committed_schema_is_the_generated_one(update_golden: bool) -> None:
    if update_golden:
        SCHEMA_FILE.write_text(render_schema(), encoding="utf-8")
    assert SCHEMA_FILE.read_text(encoding="utf-8") == render_schema(), (
        "docs/registry.schema.json is stale: run `python -m hpdsl.ir.schema > "
        "docs/registry.schema.json` (or pytest --update-golden)")


def test_schema_is_valid_and_closed() -> None:
    schema = registry_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for name, definition in schema["$defs"].items():
        assert definition["additionalProperties"] is False, name


@pytest.mark.parametrize("path", GOLDEN_REGISTRIES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_registry_validates_against_the_schema(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(registry_schema()).validate(data)


def test_shipped_registry_validates_against_the_schema(shipped: str) -> None:
    jsonschema.Draft202012Validator(registry_schema()).validate(json.loads(shipped))


def test_schema_rejects_what_the_converter_rejects() -> None:
    data = json.loads(TINY.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(registry_schema())
    profile = next(iter(data["profiles"].values()))
    profile["colour"] = "red"
    assert not validator.is_valid(data)
    del profile["colour"]
    next(iter(profile["kinds"].values()))["ops"]["attMM"] = "4"
    assert not validator.is_valid(data)


# --------------------------------------------------------------------------
# Registry lookups and copies
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry(TINY)


def test_lookups_return_the_ir(registry: Registry) -> None:
    for name, model in registry.models.items():
        assert registry.model(name) is model
        assert registry.profile(model.profile).name == model.profile
    for name in registry.families:
        assert registry.family(name).name == name


def test_an_unknown_name_suggests_the_closest(registry: Registry) -> None:
    name = next(iter(registry.families))
    with pytest.raises(UnknownNameError, match=f"no family '{name}x'; did you mean '{name}'") as caught:
        registry.family(name + "x")
    assert isinstance(caught.value, HpdslError)
    assert (caught.value.what, caught.value.name) == ("family", name + "x")
    with pytest.raises(UnknownNameError, match="it holds"):
        registry.model("zzzzzzzz")


def test_tables_are_read_only(registry: Registry) -> None:
    with pytest.raises(TypeError):
        registry.models["new"] = registry.models[next(iter(registry.models))]  # type: ignore[index]


def test_with_copies_leave_the_original_alone(registry: Registry) -> None:
    family = FamilyIR("aaa_new_family", "pkg.mod:Factory")
    copy = registry.with_family(family)
    assert copy.family("aaa_new_family") == family
    assert "aaa_new_family" not in registry.families
    assert list(json.loads(copy.to_json())["families"])[0] == "aaa_new_family"  # still sorted
    model = attrs.evolve(registry.model(next(iter(registry.models))), hidden=1)
    assert registry.with_model(model).model(model.name).hidden == 1


# --------------------------------------------------------------------------
# load_registry errors
# --------------------------------------------------------------------------


@pytest.fixture
def golden_data() -> dict:
    return json.loads(TINY.read_text(encoding="utf-8"))


def load_data(tmp_path: Path, data: object) -> Registry:
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return load_registry(path)


def test_a_missing_file_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="cannot read registry .*no such file"):
        load_registry(tmp_path / "nope.json")


def test_bad_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    path.write_text('{\n  "schema_version": 1,\n  oops\n}\n')
    with pytest.raises(LoadError, match=r"registry.json:3:3: not valid JSON"):
        load_registry(path)


def test_an_unknown_key_names_its_path(tmp_path: Path, golden_data: dict) -> None:
    name = next(iter(golden_data["models"]))
    golden_data["models"][name]["hiden"] = 1
    with pytest.raises(LoadError) as caught:
        load_data(tmp_path, golden_data)
    assert caught.value.errors == (f"$.models.{name}.hiden: unknown key in ModelIR; did you mean 'hidden'?",)
    assert str(tmp_path / "registry.json") in caught.value.message


def test_a_wrong_type_names_its_path(tmp_path: Path, golden_data: dict) -> None:
    profile = next(iter(golden_data["profiles"]))
    kind = next(iter(golden_data["profiles"][profile]["kinds"]))
    golden_data["profiles"][profile]["kinds"][kind]["ops"]["attMM"] = "4"
    with pytest.raises(LoadError) as caught:
        load_data(tmp_path, golden_data)
    assert caught.value.errors == (
        f"$.profiles.{profile}.kinds.{kind}.ops.attMM: expected an integer, found the string '4'",)


def test_a_bad_schema_version_is_reported_alone(tmp_path: Path, golden_data: dict) -> None:
    golden_data["schema_version"] = 999
    golden_data["models"] = "garbage"
    with pytest.raises(LoadError, match="unsupported registry schema_version") as caught:
        load_data(tmp_path, golden_data)
    assert caught.value.errors == (f"$.schema_version: expected {SCHEMA_VERSION}, found the number 999",)


# --------------------------------------------------------------------------
# Loading a registry stays light
# --------------------------------------------------------------------------


def test_loading_a_registry_imports_neither_lark_nor_torch() -> None:
    code = (
        "import sys, hpdsl\n"
        f"registry = hpdsl.load_registry({str(TINY)!r})\n"
        "assert registry.models, 'no models'\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('lark', 'torch'))\n"
        "print(','.join(heavy))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == ""


def test_importing_hpdsl_is_lazy() -> None:
    code = ("import sys, hpdsl\n"
            "print(sorted(m for m in sys.modules if m.startswith(('hpdsl.', 'lark', 'cattrs'))))\n"
            "print(callable(hpdsl.compile_paths), hpdsl.__version__)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    imported, exported = run.stdout.splitlines()
    assert imported == "[]"
    assert exported.startswith("True ")
