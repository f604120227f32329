"""The field table is the one declaration of a model field: every record derives from it."""

from __future__ import annotations

from pathlib import Path

import attrs

from hpdsl.bound.config import BOUND, DIM_NAMES, LayerConfig
from hpdsl.importers.hf import FIELD_ORDER
from hpdsl.ir.nodes import ModelIR
from hpdsl.model.fields import BLOCKS, FIELDS, block_fields, render_table

ROOT = Path(__file__).resolve().parents[2]


def test_docs_field_list_is_generated_from_the_table() -> None:
    text = (ROOT / "docs" / "language.md").read_text()
    assert render_table() in text, "regenerate with: python -m hpdsl.model.fields"


def test_every_field_is_held_by_the_ir_and_the_layer_config_under_its_name() -> None:
    ir = set(attrs.fields_dict(ModelIR))
    layer = set(attrs.fields_dict(LayerConfig))
    assert set(FIELDS) <= ir and set(FIELDS) <= layer
    assert layer == set(FIELDS) | set(BOUND)


def test_names_are_unique_across_blocks_and_dims_read_every_count_and_flag() -> None:
    assert len({name for block in BLOCKS for name in block_fields(block)}) == sum(
        len(block_fields(block)) for block in BLOCKS)
    counts = {name for name, field in FIELDS.items() if field.type in ("int", "bool")}
    assert counts <= set(DIM_NAMES)


def test_the_standard_profiles_map_every_config_key_the_table_lists_and_the_importer_keeps_its_order() -> None:
    """The table's `hf` column (docs/language.md) is what the profiles' `map` rules read (docs/importing.md)."""
    from hpdsl.api import check_sources
    from hpdsl.importers.rules import all_rules

    registry = check_sources([], stdlib=True).registry
    assert registry is not None
    rules = all_rules(registry.profiles)
    for name, field in FIELDS.items():
        path = name if field.block is None else f"{field.block}.{name}"
        assert set(field.hf) <= set(rules.keys(path)), (path, field.hf, rules.keys(path))
    assert list(FIELD_ORDER) == [n for n, f in FIELDS.items() if f.block is None and f.type != "choice"]


# --------------------------------------------------------------------------
# The standard declarations (fields/model.hpf) and the table read at import
# --------------------------------------------------------------------------


def test_the_table_hpdsl_reads_is_the_standard_declarations() -> None:
    from hpdsl.ir.lower_fields import lower_field, render_table_json, standard_declarations
    from hpdsl.model.fields import table_path

    declared = [lower_field(decl) for decl in standard_declarations()]
    assert declared == list(FIELDS.values())
    assert table_path().read_text(encoding="utf-8") == render_table_json(declared), \
        "rewrite the table: python -m hpdsl.ir.lower_fields"


REMOVED = {"sandwich_norms": "`wiring sandwich` (docs/language.md#block-wiring)"}
"""Standard fields removed after the move, and what replaced each."""

CHANGED = {"ssm_state": "minimum 0: a stateless mixer, LFM2's short convolution (families/short_conv.hpf)",
           "ssm_expand": "meaning: a Mamba-2 mixer stating ssm_head_dim is ssm_heads × ssm_head_dim wide (Nemotron 3)",
           "ssm_heads": "meaning: each head ssm_head_dim wide (Nemotron 3)"}
"""Standard fields whose declaration changed after the move, and why."""


def test_the_standard_declarations_equal_the_python_table_they_replaced() -> None:
    # tests/golden/model/fields_before.json is hpdsl/model/fields.py's FIELDS as it stood before
    # issue 21 moved the fields into fields/model.hpf: every name, type, bound, default, block,
    # meaning and key of it is declared the same (later fields may join it; REMOVED names those
    # the language has since replaced).
    import json

    from hpdsl.ir.lower_fields import lower_field, standard_declarations

    before = json.loads((ROOT / "tests" / "golden" / "model" / "fields_before.json").read_text())
    declared = {decl.name.value: attrs.asdict(lower_field(decl)) for decl in standard_declarations()}
    assert len(before) == 55
    before = [row for row in before if row["name"] not in REMOVED and row["name"] not in CHANGED]
    for row in before:
        assert {**declared[row["name"]], "hf": list(declared[row["name"]]["hf"]),
                "choices": list(declared[row["name"]]["choices"])} == row
    assert [n for n in declared if n in {r["name"] for r in before}] == [r["name"] for r in before]


def test_the_standard_declarations_compile_clean_and_are_formatted() -> None:
    from hpdsl.api import check_sources
    from hpdsl.diagnostics import Source
    from hpdsl.fmt import format_source

    path = ROOT / "fields" / "model.hpf"
    text = path.read_text(encoding="utf-8")
    assert format_source(Source(str(path), text)) == text
    result = check_sources([], stdlib=True)
    assert [d for d in result.diagnostics if d.is_error] == []
    assert "<hpdsl>/fields/model.hpf" in result.sources
