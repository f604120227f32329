"""The rotary keys of a config, read key by key inside rope_scaling / rope_parameters (profiles/default.hpf).

The published Llama-3.2-1B-Instruct config (tests/data/hf/llama_3_2_1b_instruct.json, source in
tests/data/hf/SOURCES.md) states a llama3 rope_scaling object; each of its keys maps to a model
field, a key inside it that no rule names is refused by its dotted path (or dropped with
--allow-unknown), and a rope_type hpdsl does not offer is refused naming the choices.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpdsl.api import check_sources
from hpdsl.importers.hf import import_hf_config
from hpdsl.importers.hf_config import HfImportError

LLAMA = json.loads((Path(__file__).resolve().parents[1] / "data" / "hf" / "llama_3_2_1b_instruct.json").read_text())


@pytest.fixture(scope="module")
def profiles() -> dict:
    registry = check_sources([], stdlib=True).registry
    assert registry is not None
    return dict(registry.profiles)


def test_each_key_of_the_object_is_a_field(profiles: dict) -> None:
    text = import_hf_config(LLAMA, profiles=profiles, name="m").text
    for line in ('rope_type "llama3"', "rope_theta 500000.0", "rope_factor 32.0", "rope_low_freq_factor 1.0",
                 "rope_high_freq_factor 4.0", "rope_original_positions 8192"):
        assert f"  {line}\n" in text


def test_an_unnamed_key_inside_is_refused_by_its_path(profiles: dict) -> None:
    config = {**LLAMA, "rope_scaling": {**LLAMA["rope_scaling"], "beta_x": 2.0}}
    with pytest.raises(HfImportError, match=r"rope_scaling\.beta_x"):
        import_hf_config(config, profiles=profiles, name="m")
    text = import_hf_config(config, profiles=profiles, name="m", allow_unknown=True).text
    assert "rope_factor 32.0" in text  # the named keys still read


def test_a_rope_type_hpdsl_does_not_offer_is_refused(profiles: dict) -> None:
    config = {**LLAMA, "rope_scaling": {**LLAMA["rope_scaling"], "rope_type": "spiral"}}
    with pytest.raises(HfImportError, match="spiral"):
        import_hf_config(config, profiles=profiles, name="m")
