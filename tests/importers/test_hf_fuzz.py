"""The importer's contract: a config it accepts becomes a model that compiles; any other is an HfImportError.

Hypothesis mutates the published configs of tests/importers/hf_configs.py (values replaced by
random JSON values, keys deleted, unknown keys added); `hpdsl import-hf` itself never exits 3.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpdsl.api import check_sources
from hpdsl.diagnostics import Source
from hpdsl.importers.hf import HfImportError, check_imported, import_hf_config, import_hf_file
from hpdsl.fmt import format_stack_list
from hpdsl.ir.stack import compress_kinds, expand_stack, layer_kinds
from tests.importers.hf_configs import CONFIGS, DATA, shrunk

NAMES = sorted(CONFIGS)


@cache
def _profiles() -> Any:
    result = check_sources([], stdlib=True)
    assert result.registry is not None
    return result.registry.profiles


SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(-3, 3), st.integers(-(10 ** 6), 10 ** 6), st.integers(2 ** 31 - 2, 2 ** 70),
    st.sampled_from([10 ** 12, -(10 ** 12), 2 ** 63, 2 ** 16, 2 ** 16 + 1]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([64.0, 1.5, -0.0]),
    st.text(max_size=8), st.sampled_from(["silu", "full_attention", "gated-gelu", "llama"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
MUTATION = st.tuples(st.sampled_from(["set", "delete", "add"]), st.integers(0, 10 ** 6), VALUES)


def _mutate(config: dict[str, Any], mutations: list[tuple[str, int, Any]]) -> dict[str, Any]:
    """Apply each mutation to the config (or its text_config, when it has one, half the time)."""
    config = copy.deepcopy(config)
    for op, pick, value in mutations:
        target = config
        if isinstance(config.get("text_config"), dict) and pick % 2:
            target = config["text_config"]
        if op == "add":
            target[f"unknown_{pick % 7}"] = value
            continue
        keys = sorted(target)
        if not keys:
            continue
        key = keys[pick % len(keys)]
        if op == "delete":
            del target[key]
        else:
            target[key] = value
    return config


def _assert_contract(config: dict[str, Any], allow_unknown: bool) -> None:
    try:
        imported = import_hf_config(config, profiles=_profiles(), name="fuzzed", allow_unknown=allow_unknown)
        check_imported(imported)  # what `hpdsl import-hf` runs before it writes
    except HfImportError as exc:
        assert str(exc)
        return
    result = check_sources([Source("fuzzed.hpf", imported.text)], stdlib=True)
    assert result.registry is not None, ([d.message for d in result.diagnostics], imported.text)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(NAMES), st.lists(MUTATION, min_size=1, max_size=4), st.booleans())
@example("qwen3_0_6b", [("set", 0, float("inf"))], True)
@example("gemma3_1b", [("set", 1812, None)], False)  # intermediate_size null: dense layers with no width
@example("gemma3_1b", [("set", 17866, 15385)], False)  # 15,385 layers: the stack line ran past 100,000 characters
def test_a_mutated_config_imports_to_a_compiling_model_or_an_hf_error(
        name: str, mutations: list[tuple[str, int, Any]], allow_unknown: bool) -> None:
    _assert_contract(_mutate(CONFIGS[name][0], mutations), allow_unknown)


LLAMA = shrunk("llama_3_2_1b_instruct", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, vocab_size=100, intermediate_size=128)
"""Llama-3.2-1B-Instruct's published config.json made small: the valid base each malformed value below edits."""


@pytest.mark.parametrize(("key", "value"), [
    ("num_hidden_layers", 0), ("num_hidden_layers", -1), ("num_hidden_layers", 10 ** 12),
    ("num_hidden_layers", [2]), ("num_hidden_layers", "2"), ("num_hidden_layers", {"n": 2}),
    ("num_hidden_layers", True), ("num_hidden_layers", 2.5), ("num_hidden_layers", float("nan")),
    ("hidden_size", 0), ("hidden_size", -64), ("hidden_size", float("inf")), pytest.param("hidden_size", 10 ** 5000, id="hidden_size-5000-digits"),
    ("num_attention_heads", 0), ("num_attention_heads", -4), ("vocab_size", None),
    ("intermediate_size", -1), ("intermediate_size", 2 ** 40),
])
def test_a_bad_count_is_an_error_naming_its_key(key: str, value: Any) -> None:
    with pytest.raises(HfImportError) as raised:
        import_hf_config({**LLAMA, key: value}, profiles=_profiles(), name="bad")
    assert raised.value.field == key and key in str(raised.value)


def _deep(depth: int) -> str:
    return '{"model_type": "llama", "x": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize("text", [
    json.dumps(LLAMA).replace("64", "Infinity", 1), json.dumps(LLAMA).replace("64", "NaN", 1),
    json.dumps(LLAMA).replace("64", "-Infinity", 1), json.dumps(LLAMA).replace("64", "9" * 5000, 1),
    _deep(100_000), "[1, 2]", "{",
], ids=["inf", "nan", "-inf", "5000-digits", "deep", "list", "truncated"])
def test_an_unreadable_config_is_an_error_and_the_cli_exits_1(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(HfImportError):
        import_hf_file(path, profiles=_profiles())
    proc = subprocess.run([sys.executable, "-m", "hpdsl", "import-hf", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("hpdsl")


def test_infinity_in_a_key_hpdsl_ignores_is_read_and_in_a_key_it_reads_is_refused(tmp_path: Path) -> None:
    """Nemotron-H's published file states time_step_limit [0.0, Infinity] (ignored); a width may not say Infinity."""
    published = DATA / "nemotron_h_56b_base_8k.json"
    assert "Infinity" in published.read_text(encoding="utf-8")
    assert import_hf_file(published, profiles=_profiles(), name="nemotron").profile == "nemotron_h"
    path = tmp_path / "config.json"
    path.write_text(published.read_text(encoding="utf-8").replace('"hidden_size": 8192', '"hidden_size": Infinity'))
    with pytest.raises(HfImportError) as raised:
        import_hf_file(path, profiles=_profiles())
    assert raised.value.field == "hidden_size" and "hidden_size states Infinity" in str(raised.value)


@pytest.mark.parametrize(("key", "value"), [("tie_word_embeddings", "false"), ("attention_bias", [1]),
                                            ("mlp_bias", 2), ("qk_norm", {"a": 1})])
def test_a_flag_that_is_not_true_or_false_is_an_error_naming_its_key(key: str, value: Any) -> None:
    with pytest.raises(HfImportError) as raised:
        import_hf_config({**LLAMA, key: value}, profiles=_profiles(), name="bad")
    assert raised.value.field == key and key in str(raised.value)


def test_a_model_the_compiler_refuses_is_an_error_naming_the_config_key(tmp_path: Path) -> None:
    config = {k: v for k, v in CONFIGS["gemma3_1b"][0].items() if k != "intermediate_size"}
    with pytest.raises(HfImportError) as raised:
        check_imported(import_hf_config(config, profiles=_profiles(), name="no_width"))
    assert raised.value.field == "intermediate_size" and "ffn_width" in str(raised.value)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    proc = subprocess.run([sys.executable, "-m", "hpdsl", "import-hf", str(path), "-o", str(tmp_path / "m.hpf")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "intermediate_size" in proc.stderr
    assert not (tmp_path / "m.hpf").exists()  # nothing written


@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=8), st.integers(1, 3000),
       st.lists(st.sampled_from("abc"), max_size=8))
@settings(max_examples=60, deadline=None)
def test_compress_kinds_expands_back_to_the_kinds_in_a_short_line(
        pattern: list[str], repeat: int, tail: list[str]) -> None:
    kinds = pattern * repeat + tail
    stack = compress_kinds(kinds)
    assert layer_kinds(expand_stack(stack)) == kinds
    assert len(format_stack_list(stack)) < 400  # a pattern that does not divide still writes short


def test_a_layer_types_list_with_no_pattern_too_long_to_write_is_an_error() -> None:
    rng = random.Random(0)
    kinds = [rng.choice(("sliding_attention", "full_attention")) for _ in range(60_000)]
    config = {**CONFIGS["gemma3_1b"][0], "num_hidden_layers": 60_000, "layer_types": kinds}
    with pytest.raises(HfImportError) as raised:
        check_imported(import_hf_config(config, profiles=_profiles(), name="long"))
    assert raised.value.field == "layer_types"


def test_a_fifo_or_a_name_too_long_is_an_error_not_a_hang_or_a_crash(tmp_path: Path) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # read_text() on it would block until a writer came
    with pytest.raises(HfImportError, match="not a regular file"):
        import_hf_file(fifo, profiles=_profiles())
    with pytest.raises(HfImportError, match="cannot read the config"):
        import_hf_file(tmp_path / ("x" * 5000), profiles=_profiles())
    for path in (fifo, "x" * 5000):
        proc = subprocess.run([sys.executable, "-m", "hpdsl", "import-hf", str(path)], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.startswith("hpdsl") and "Traceback" not in proc.stderr
