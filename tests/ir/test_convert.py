"""The one converter: round trips of every IR class, strictness, default omission, error paths."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

# tests/ is on sys.path (pytest puts the rootdir conftest's folder there).
from property.ir_strategies import for_class, ir_classes, registries

from hpdsl.errors import LoadError
from hpdsl.ir.convert import (
    registry_from_data,
    registry_to_json,
    structure,
    unstructure,
)
from hpdsl.ir.nodes import (
    SCHEMA_VERSION,
    Condition,
    FamilyIR,
    KindIR,
    LayerGroup,
    ModelIR,
    OpInfo,
    ProfileIR,
    RegistryIR,
    RunFacts,
    SelectorIR,
)
from hpdsl.ir.validate import registry_problems


# --------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ir_classes(), ids=lambda cls: cls.__name__)
@given(data=st.data())
def test_structure_inverts_unstructure(cls: type, data: st.DataObject) -> None:
    value = data.draw(for_class(cls))
    unstructured = unstructure(value)
    assert structure(unstructured, cls) == value
    # The data is plain JSON: through text and back gives the same value.
    assert structure(json.loads(json.dumps(unstructured)), cls) == value


@given(registries())
def test_registry_json_round_trip(registry: RegistryIR) -> None:
    # Generated registries are well-typed but not consistent as a whole (hpdsl/ir/validate.py):
    # the schema layer round-trips them, and registry_from_data loads the consistent ones.
    text = registry_to_json(registry)
    assert structure(json.loads(text), RegistryIR) == registry
    assert registry_to_json(structure(json.loads(text), RegistryIR)) == text
    if not registry_problems(registry):
        assert registry_from_data(json.loads(text)) == registry


def test_condition_tree_round_trips() -> None:
    tree = Condition("and", operands=(
        Condition("ref", name="use_mxfp8"),
        Condition("not", operands=(Condition("in", name="ep", values=(1, 2)),)),
        Condition("cmp", name="backend", cmp="==", value="eager"),
    ), text="use_mxfp8 and not ep in (1, 2) and backend == eager")
    data = unstructure(tree)
    assert data["operands"][1] == {"op": "not", "operands": [{"op": "in", "name": "ep", "values": [1, 2]}]}
    assert structure(data, Condition) == tree


# --------------------------------------------------------------------------
# Unstructuring: absent is not zero
# --------------------------------------------------------------------------


def test_fields_equal_to_their_default_are_omitted() -> None:
    assert unstructure(KindIR("decoder", {"attMM": 4})) == {"name": "decoder", "ops": {"attMM": 4}}
    assert unstructure(RunFacts()) == {}
    assert unstructure(RunFacts(grad_bytes=2)) == {"grad_bytes": 2}
    assert unstructure(LayerGroup("mtp", 1, mtp=True)) == {"kind": "mtp", "count": 1, "mtp": True}


def test_a_stated_zero_is_kept() -> None:
    model = ModelIR("m", "p", hidden=8, layers=2, heads=2, vocab=10, first_k_dense=0,
                    tie_embeddings=False)
    data = unstructure(model)
    assert data["first_k_dense"] == 0 and data["tie_embeddings"] is False
    assert "kv_heads" not in data and "ffn_width" not in data


def test_tuples_become_lists_and_dicts_keep_their_order() -> None:
    kind = KindIR("k", {"b": 1, "a": 2, "c": 3})
    assert list(unstructure(kind)["ops"]) == ["b", "a", "c"]
    assert unstructure(SelectorIR("s", "enum", values=("x", "y")))["values"] == ["x", "y"]


def test_registry_tables_are_sorted_and_always_present() -> None:
    registry = RegistryIR(SCHEMA_VERSION, "sha256:0", (OpInfo("attMM", "m"),),
                          families={"b": FamilyIR("b", "m:B"), "a": FamilyIR("a", "m:A")})
    data = unstructure(registry)
    assert list(data) == ["schema_version", "source_hash", "ops", "profiles", "families", "models"]
    assert list(data["families"]) == ["a", "b"]
    assert data["profiles"] == {} and data["models"] == {}


def test_registry_json_is_indented_with_a_trailing_newline() -> None:
    registry = RegistryIR(SCHEMA_VERSION, "sha256:0", (OpInfo("attBMM", "Q·Kᵀ"),))
    text = registry_to_json(registry)
    assert text.endswith("}\n") and text.startswith('{\n  "schema_version": 1,\n')
    assert "Q·Kᵀ" in text  # UTF-8, not \u escapes


# --------------------------------------------------------------------------
# Structuring is strict
# --------------------------------------------------------------------------


def test_an_int_is_accepted_for_a_float() -> None:
    value = structure(1, float)
    assert value == 1.0 and type(value) is float


@pytest.mark.parametrize(("cls", "data", "line"), [
    (KindIR, {"name": "k", "ops": {"attMM": "4"}},
     "$.ops.attMM: expected an integer, found the string '4'"),
    (KindIR, {"name": "k", "ops": {"attMM": True}},
     "$.ops.attMM: expected an integer, found the boolean true"),
    (KindIR, {"name": "k", "ops": {"attMM": 4.0}},
     "$.ops.attMM: expected an integer, found the number 4.0"),
    (KindIR, {"name": 3, "ops": {}}, "$.name: expected a string, found the number 3"),
    (KindIR, {"name": "k", "ops": []}, "$.ops: expected an object, found a list"),
    (KindIR, {"name": "k", "ops": {}, "attention": "ful"},
     '$.attention: expected one of "full", "linear", "sliding", "ssm", "cross", found the string \'ful\''),
    (KindIR, {"name": "k", "ops": {}, "ffn": 1}, '$.ffn: expected one of "dense", "moe", found the number 1'),
    (KindIR, {"name": "k"}, "$.ops: the required key is missing"),
    (KindIR, {"name": "k", "ops": {}, "opz": {}}, "$.opz: unknown key in KindIR; did you mean 'ops'?"),
    (LayerGroup, {"kind": "k", "count": 1, "mtp": 1}, "$.mtp: expected a boolean, found the number 1"),
    (SelectorIR, {"name": "s", "type": "enum", "values": "ab"},
     "$.values: expected a list, found the string 'ab'"),
    (Condition, {"op": "cmp", "value": [1]},
     "$.value: expected a boolean, an integer, a number, a string or null, found a list"),
    (Condition, {"op": "and", "operands": [{"op": "ref"}, {"op": "nand"}]},
     '$.operands[1].op: expected one of "ref", "const", "cmp", "in", "not", "and", "or", '
     '"implies", found the string \'nand\''),
    (ProfileIR, {"name": "p", "kinds": {"decoder": {"name": "decoder", "ops": {"attMM": "4"}}}},
     "$.kinds.decoder.ops.attMM: expected an integer, found the string '4'"),
    (ProfileIR, {"name": "p", "kinds": {"a b": {"name": 1, "ops": {}}}},
     '$.kinds["a b"].name: expected a string, found the number 1'),
    (ProfileIR, {"name": "p", "kinds": {}, "run": []}, "$.run: expected an object (RunFacts), found a list"),
])
def test_structuring_rejects_with_the_json_path(cls: type, data: Any, line: str) -> None:
    with pytest.raises(LoadError) as caught:
        structure(data, cls)
    assert caught.value.errors == (line,)


def test_every_error_is_reported_at_once() -> None:
    with pytest.raises(LoadError) as caught:
        structure({"name": 1, "ops": {"a": "1", "b": None}, "extra": 0}, KindIR)
    assert len(caught.value.errors) == 4
    assert caught.value.message == "not a valid KindIR (4 errors)"


# --------------------------------------------------------------------------
# registry_from_data: the schema version first
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "found"), [
    ({"schema_version": SCHEMA_VERSION + 1, "garbage": True}, f"the number {SCHEMA_VERSION + 1}"),
    ({"schema_version": str(SCHEMA_VERSION)}, f"the string '{SCHEMA_VERSION}'"),
    ({"schema_version": True}, "the boolean true"),
    ({"ops": []}, "no schema_version"),
])
def test_an_unsupported_schema_version_is_rejected_first(data: dict[str, Any], found: str) -> None:
    with pytest.raises(LoadError) as caught:
        registry_from_data(data)
    assert "unsupported registry schema_version" in caught.value.message
    assert caught.value.errors == (f"$.schema_version: expected {SCHEMA_VERSION}, found {found}",)


def test_a_registry_must_be_an_object() -> None:
    with pytest.raises(LoadError) as caught:
        registry_from_data([1, 2])
    assert caught.value.errors == ("$: expected an object, found a list",)


def test_a_nested_registry_error_names_the_full_path() -> None:
    data = {"schema_version": SCHEMA_VERSION, "source_hash": "sha256:0", "ops": [],
            "profiles": {"qwen": {"name": "qwen", "kinds": {
                "decoder": {"name": "decoder", "ops": {"attMM": "4"}}}}}}
    with pytest.raises(LoadError) as caught:
        registry_from_data(data)
    assert caught.value.errors == (
        "$.profiles.qwen.kinds.decoder.ops.attMM: expected an integer, found the string '4'",)
