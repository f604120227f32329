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
