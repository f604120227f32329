"""A key stated as null, or at a value its rules ignore, leaves its field unset (issue 21, import rules as data).

Published files state `"sliding_window": null` (no window: Devstral-2's, Voxtral's and olmOCR-2's
text_config) and YaRN's `mscale_all_dim: 0.0` and Ministral 3's `llama_4_scaling_beta: 0.0` (off:
transformers tests both for truth). Neither may fall back to transformers' default for an absent
key (MistralConfig's 4,096-token window), nor be refused as a non-positive number.
"""

from __future__ import annotations

import pytest

from hpdsl.api import check_sources
from hpdsl.diagnostics import Source
from hpdsl.importers.hf import import_hf_config
from tests.importers.hf_configs import shrunk


@pytest.fixture(scope="module")
def profiles():
    result = check_sources([], stdlib=True)
    assert result.registry is not None
    return result.registry.profiles


def _model(profiles, config: dict, name: str):
    text = import_hf_config(config, profiles=profiles, name=name).text
    result = check_sources([Source(f"{name}.hpf", text)], stdlib=True)
    assert result.registry is not None, [d.message for d in result.diagnostics]
    return result.registry.models[name]


def test_a_null_window_is_no_window_not_the_config_class_default(profiles) -> None:
    # Devstral-2's published file under MistralConfig, whose default for an absent key is a 4,096 window.
    stated_null = _model(profiles, shrunk("devstral_2_123b_instruct", model_type="mistral"), "null_window")
    absent = _model(profiles, shrunk("devstral_2_123b_instruct", drop=("sliding_window",), model_type="mistral"),
                    "absent_window")
    assert stated_null.sliding_window is None
    assert absent.sliding_window == 4096


def test_a_zero_that_transformers_reads_as_off_leaves_the_rope_field_unset(profiles) -> None:
    published = _model(profiles, shrunk("devstral_2_123b_instruct"), "devstral")
    assert published.rope_type == "yarn" and published.rope_factor == 64.0
    assert published.rope_mscale_all_dim is None and published.rope_query_beta is None
    on = shrunk("devstral_2_123b_instruct")
    on["rope_parameters"] = {**on["rope_parameters"], "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}
    scaled = _model(profiles, on, "devstral_scaled")
    assert scaled.rope_mscale_all_dim == 1.0 and scaled.rope_query_beta == 0.1


def test_a_negative_mscale_is_still_refused_naming_the_key(profiles) -> None:
    from hpdsl.importers.hf import HfImportError

    bad = shrunk("devstral_2_123b_instruct")
    bad["rope_parameters"] = {**bad["rope_parameters"], "mscale_all_dim": -1.0}
    with pytest.raises(HfImportError, match="rope_parameters.mscale_all_dim is -1.0; expected a positive number"):
        import_hf_config(bad, profiles=profiles, name="bad")
