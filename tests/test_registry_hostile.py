"""Registries validated as a whole, byte-identical wherever compiled, loaded without importing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import hpdsl
from hpdsl.errors import LoadError
from hpdsl.model.fields import MAX_GROUPS
from hpdsl.registry import Registry, load_registry

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
def good_text() -> str:
    return hpdsl.compile_paths([EXAMPLES]).to_json()


@pytest.fixture
def good(good_text: str) -> dict[str, Any]:
    """A fresh copy per test: each test edits it."""
    data: dict[str, Any] = json.loads(good_text)
    return data


def _errors(data: Any) -> tuple[str, ...]:
    with pytest.raises(LoadError) as caught:
        Registry.from_json(json.dumps(data) if not isinstance(data, str) else data)
    return caught.value.errors


def _model(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name = "deepseek_v3" if "deepseek_v3" in data["models"] else sorted(data["models"])[0]
    return name, data["models"][name]


def test_the_compiled_registry_loads(good: dict[str, Any]) -> None:
    Registry.from_json(json.dumps(good))


def test_deep_json_and_huge_ints_are_load_errors() -> None:
    assert _errors("[" * 100_000 + "]" * 100_000) == ("$: nested too deep",)
    (line,) = _errors('{"schema_version": ' + "9" * 5000 + "}")
    assert line.startswith("$: ")


def test_a_group_kind_missing_from_the_profile(good: dict[str, Any]) -> None:
    name, model = _model(good)
    model["groups"][0]["kind"] = "no_such_kind"
    assert any(e.startswith(f"$.models.{name}.groups[0].kind: ") for e in _errors(good))


@pytest.mark.parametrize("count", [10**30, -3, 0])
def test_group_counts_out_of_bounds_or_not_summing(good: dict[str, Any], count: int) -> None:
    name, model = _model(good)
    model["groups"][0]["count"] = count
    errors = _errors(good)
    assert any(e.startswith(f"$.models.{name}.groups[0].count: ") for e in errors)
    assert any("the body groups hold" in e for e in errors)


def test_negative_layers_and_a_key_differing_from_its_name(good: dict[str, Any]) -> None:
    name, model = _model(good)
    model["layers"] = -1
    good["models"]["renamed"] = good["models"].pop(name)
    errors = _errors(good)
    assert "$.models.renamed.layers: must be at least 1, found -1" in errors
    assert f"$.models.renamed.name: the entry under 'renamed' is named '{name}'" in errors


@pytest.mark.parametrize("factory", ["hpdsl.torch.agreement:nn.utils.weight_norm",
                                     "hpdsl.torch.resolve:importlib.import_module",
                                     "os:system; rm", ":X", "a..b:C"])
def test_attribute_walk_factories_are_refused_by_load_registry(good: dict[str, Any],
                                                                factory: str) -> None:
    family = sorted(good["families"])[0]
    good["families"][family]["factory"] = factory
    assert any(e.startswith(f"$.families.{family}.factory: ") for e in _errors(good))


def test_load_registry_imports_nothing(tmp_path: Path) -> None:
    # An import hook records every import loading makes: only hpdsl's own loader modules
    # and the standard library, never a module a factory or variant names.
    (tmp_path / "registry.json").write_text(hpdsl.compile_paths([EXAMPLES]).to_json())
    script = (
        "import sys, json, hpdsl.registry\n"
        "seen = []\n"
        "class Hook:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        seen.append(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Hook())\n"
        "before = set(sys.modules)\n"
        f"reg = hpdsl.registry.load_registry({str(tmp_path / 'registry.json')!r})\n"
        "named = {p.partition(':')[0] for f in reg.families.values()\n"
        "         for p in (f.factory, *(v.path for v in f.variants))}\n"
        "loaded = sorted(set(sys.modules) - before)\n"
        "print(json.dumps({'seen': seen, 'loaded': loaded, 'named': sorted(named),\n"
        "                  'models': len(reg.models)}))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["models"] and result["named"]
    for name in result["loaded"]:
        top = name.partition(".")[0]
        assert top in ("hpdsl", "attrs", "cattrs", "typing_extensions") or top in sys.stdlib_module_names, name
        assert not name.startswith(("hpdsl.torch", "torch")), name
    assert not set(result["seen"]) & set(result["named"])  # never even looked for


def test_the_same_sources_compiled_from_two_directories_give_identical_bytes(tmp_path: Path) -> None:
    outputs = []
    for where in ("one/deep/er", "two"):
        project = tmp_path / where / "examples"
        shutil.copytree(EXAMPLES, project)
        out = tmp_path / f"{where.replace('/', '_')}.json"
        subprocess.run([sys.executable, "-m", "hpdsl", "compile", "examples", "-o", str(out)],
                       cwd=project.parent, check=True, capture_output=True)
        outputs.append(out.read_bytes())
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "two" / "examples")
    out = tmp_path / "link.json"
    subprocess.run([sys.executable, "-m", "hpdsl", "compile", str(link), "-o", str(out)],
                   cwd=REPO, check=True, capture_output=True)
    outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    assert b'"file": "<hpdsl>/' in outputs[0]
    assert str(tmp_path).encode() not in outputs[0]
    assert load_registry(tmp_path / "two.json").models


def test_a_fifo_a_folder_and_an_oversized_file_are_load_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import hpdsl.registry

    os.mkfifo(tmp_path / "pipe.json")
    with pytest.raises(LoadError, match="a FIFO, not a regular file"):
        load_registry(tmp_path / "pipe.json")  # refused at once: never blocks waiting for a writer
    with pytest.raises(LoadError, match="a folder, not a regular file"):
        load_registry(tmp_path)
    (tmp_path / "big.json").write_text("{}" + " " * 2048)
    monkeypatch.setattr(hpdsl.registry, "MAX_REGISTRY_BYTES", 1024)
    with pytest.raises(LoadError, match="larger than 1,024 bytes"):
        load_registry(tmp_path / "big.json")


# Found by bench/fuzz.py's registry target: each loaded, then failed or priced nonsense in cost/bind.py.
def test_an_op_count_out_of_range_or_off_the_vocabulary(good: dict[str, Any]) -> None:
    kinds = good["profiles"]["llama2"]["kinds"]
    kinds["decoder"]["ops"]["ffMM"] = -12967435138379210854  # priced a model at -1.9e28 parameters
    del kinds["decoder"]["ops"]["softmax"]
    errors = _errors(good)
    assert f"$.profiles.llama2.kinds.decoder.ops.ffMM: must be from 0 to {2**62}, found -12967435138379210854" in errors
    assert any(e.startswith("$.profiles.llama2.kinds.decoder.ops: not the registry's op vocabulary (missing "
                            "['softmax']") for e in errors)


@pytest.mark.parametrize("field", ["vocab", "hidden"])
def test_a_required_field_that_is_null(good: dict[str, Any], field: str) -> None:
    name, model = _model(good)
    model[field] = None  # a TypeError in hpdsl/cost/facts/params.py (vocab) or bind.py (hidden // heads)
    assert f"$.models.{name}.{field}: required, found null" in _errors(good)


def test_learned_positions_without_their_count(good: dict[str, Any]) -> None:
    name, model = _model(good)
    model["learned_positions"], model["max_positions"] = True, None  # would price and build zero rows
    assert f"$.models.{name}.max_positions: required with learned_positions, found null" in _errors(good)


def test_a_stated_block_missing_a_required_field(good: dict[str, Any]) -> None:
    name, model = _model(good)
    assert model["experts"] is not None
    model["top_k"] = None
    assert f"$.models.{name}.top_k: required in a moe block, found null" in _errors(good)


def test_run_facts_and_the_default_kind_out_of_range(good: dict[str, Any]) -> None:
    profile = good["profiles"]["llama2"]
    profile.setdefault("run", {})["norm_bytes"] = -4  # a profile stating only defaults has no "run"
    profile["default"] = "no_such_kind"
    errors = _errors(good)
    assert f"$.profiles.llama2.run.norm_bytes: must be from 0 to {2**62}, found -4" in errors
    assert "$.profiles.llama2.default: no kind 'no_such_kind'" in errors


def test_a_condition_nested_past_the_parsers_limit(good: dict[str, Any]) -> None:
    # Within json's own depth, but deeper than any compiled spec: evaluating it would recurse 300 deep.
    condition: dict[str, Any] = {"op": "ref", "name": "parallel", "text": "parallel"}
    for _ in range(300):
        condition = {"op": "not", "operands": [condition]}
    good["families"]["attention"]["variants"][1]["when"] = condition
    assert "$.families.attention.variants[1].when: nests deeper than 100" in _errors(good)


def test_more_groups_than_a_model_may_have(good: dict[str, Any]) -> None:
    name, model = _model(good)
    kinds = [group["kind"] for group in model["groups"] if not group.get("mtp")]
    other = next(kind for kind in good["profiles"][model["profile"]]["kinds"] if kind != kinds[0])
    groups = [{"kind": (kinds[0], other)[i % 2], "count": 1, "mtp": False} for i in range(MAX_GROUPS + 1)]
    model.update(groups=groups + [g for g in model["groups"] if g.get("mtp")], layers=MAX_GROUPS + 1)
    errors = _errors(good)
    assert f"$.models.{name}.groups: {MAX_GROUPS + 1} body groups, more than the {MAX_GROUPS} a model may have" in errors
