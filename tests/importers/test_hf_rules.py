"""Import rules as data: a profile file alone adds a model_type; forcing --profile names what it cannot map.

The configs are the published ones of tests/importers/hf_configs.py, their model_type
renamed where a test needs a type no standard profile lists; everything runs through the
real CLI in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hpdsl.api import check_sources
from hpdsl.diagnostics import Source
from tests.importers.hf_configs import CONFIGS, config_bytes

OPS = "ops { attMM 4  attBMM 2  ffMM 2  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }"

# GPT-2's architecture under a model_type of its own, with GPT-2's key names: nothing in hpdsl's Python
# knows n_embd, n_inner or activation_function; these rules do.
ACME = f"""profile acme {{
  model_types "acme_gpt"
  kind decoder {{
    {OPS}
  }}
  facts {{
    qkv_bias = true
    o_bias = true
    mlp_bias = true
    norm_bias = true
    learned_positions = true
    norm = "layernorm"
  }}
  hf "acme_gpt" {{
    default tie_word_embeddings = true
    default activation_function = "gelu_new"
    map n_embd -> hidden
    map n_layer -> layers
    map n_head -> heads
    map n_inner -> ffn_width
    map n_positions -> max_positions
    read activation_function
    derive ffn_width = 4 * hidden
  }}
}}
"""


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _total(cwd: Path, *paths: str) -> int:
    estimate = _hpdsl("estimate", *paths, "--json", cwd=cwd)
    assert estimate.returncode == 0, estimate.stderr
    return int(json.loads(estimate.stdout)["params"]["total"])


def test_a_profile_file_alone_makes_a_new_model_type_importable(tmp_path: Path) -> None:
    gpt2, _ = CONFIGS["gpt2_large"]  # gpt2-large's published file (tests/data/hf/SOURCES.md)
    (tmp_path / "gpt2.json").write_bytes(config_bytes("gpt2_large"))
    assert _hpdsl("import-hf", "gpt2.json", "--name", "g", "-o", "g.hpf", cwd=tmp_path).returncode == 0
    (tmp_path / "config.json").write_text(json.dumps({**gpt2, "model_type": "acme_gpt"}))
    refused = _hpdsl("import-hf", "config.json", cwd=tmp_path)
    assert refused.returncode == 1 and "acme_gpt" in refused.stderr
    (tmp_path / "acme.hpf").write_text(ACME)
    assert _hpdsl("fmt", "--check", "acme.hpf", cwd=tmp_path).returncode == 0
    imported = _hpdsl("import-hf", "config.json", "--profiles", "acme.hpf", "--name", "a", "-o", "a.hpf",
                      cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    text = (tmp_path / "a.hpf").read_text()
    assert "model a : acme" in text and "ffn_width 5120" in text  # derived: 4 × n_embd (1280)
    assert _total(tmp_path, "acme.hpf", "a.hpf") == _total(tmp_path, "g.hpf") == 774_030_080


def test_a_rule_for_a_model_type_the_profile_does_not_list_is_a_located_error() -> None:
    bad = ACME.replace('hf "acme_gpt"', 'hf "acme_gtp"').replace("-> hidden", "-> hiden")
    result = check_sources([Source("acme.hpf", bad)], stdlib=True)
    found = {(d.code, d.span.line) for d in result.diagnostics if d.is_error}
    assert ("unknown-model-type", 14) in found and ("unknown-import-field", 17) in found
    hints = " ".join(d.hint or "" for d in result.diagnostics)
    assert "acme_gpt" in hints and "hidden" in hints


def test_forcing_a_profile_names_every_key_it_does_not_map(tmp_path: Path) -> None:
    gemma, _ = CONFIGS["gemma3_1b"]
    (tmp_path / "config.json").write_text(json.dumps(gemma))
    refused = _hpdsl("import-hf", "config.json", "--profile", "qwen", cwd=tmp_path)
    assert refused.returncode == 1 and not refused.stdout
    assert "hidden_activation" in refused.stderr and "sliding_window_pattern" in refused.stderr
    assert "profile 'qwen'" in refused.stderr and "--profile" in refused.stderr
    # Forced onto a type it does not list, the profile knows no transformers default: an absent
    # tie_word_embeddings (Gemma3TextConfig ties by default) is an error naming it, not a guess.
    untied = _hpdsl("import-hf", "config.json", "--profile", "qwen", "--allow-unknown", cwd=tmp_path)
    assert untied.returncode == 1 and "tie_word_embeddings" in untied.stderr


def test_allow_unknown_imports_a_forced_profile_saying_what_it_ignored(tmp_path: Path) -> None:
    from tests.importers.hf_configs import JAMBA_V0_1

    (tmp_path / "config.json").write_text(json.dumps(JAMBA_V0_1))
    refused = _hpdsl("import-hf", "config.json", "--profile", "llama2", cwd=tmp_path)
    assert refused.returncode == 1
    named = refused.stderr.split("states ", 1)[1].split(", which", 1)[0].split(", ")
    assert {"mamba_d_state", "attn_layer_period", "num_experts", "expert_layer_offset"} <= set(named)
    allowed = _hpdsl("import-hf", "config.json", "--profile", "llama2", "--allow-unknown", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert f"IGNORED {len(named)} config key(s)" in allowed.stderr and "WRONG" in allowed.stderr
    assert "do not include jamba" in allowed.stderr  # the forcing is said, not silent


def test_forcing_the_profile_that_lists_the_model_type_changes_nothing(tmp_path: Path) -> None:
    gemma, _ = CONFIGS["gemma3_1b"]
    (tmp_path / "config.json").write_text(json.dumps(gemma))
    plain = _hpdsl("import-hf", "config.json", cwd=tmp_path)
    forced = _hpdsl("import-hf", "config.json", "--profile", "gemma3", cwd=tmp_path)
    assert plain.returncode == forced.returncode == 0
    assert plain.stdout == forced.stdout and "forces" not in forced.stderr


def test_a_profile_stating_activation_yields_to_the_config_s_hidden_act(tmp_path: Path) -> None:
    mistral, _ = CONFIGS["mistral_7b_v0_1"]
    profile = (f'profile acts {{\n  model_types "acme_act"\n  kind decoder {{\n    {OPS.replace("ffMM 2", "ffMM 3")}'
               '\n  }\n  facts { qkv_bias = false  o_bias = false  mlp_bias = false  norm_bias = false  '
               'activation = "gelu" }\n}\n')
    (tmp_path / "acts.hpf").write_text(profile)
    dense = {k: v for k, v in mistral.items() if k != "sliding_window"}  # the profile has no windowed kind
    (tmp_path / "config.json").write_text(json.dumps({**dense, "model_type": "acme_act"}))
    imported = _hpdsl("import-hf", "config.json", "--profiles", "acts.hpf", "--name", "m", "-o", "m.hpf",
                      cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    text = (tmp_path / "m.hpf").read_text()
    assert "activation silu" in text and text.count("activation") == 1


def test_qwen3_5_rules_name_the_keys_the_published_configs_state() -> None:
    """Every Qwen3.5 type accepts mamba_ssm_dtype; a dedicated MTP embedding (not what hpdsl prices) is refused."""
    from hpdsl.importers.rules import rules_for

    registry = check_sources([], stdlib=True).registry
    assert registry is not None
    profile = registry.profiles["qwen3_5"]
    for model_type in ("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next"):
        rules = rules_for(profile, model_type, registry.profiles)
        assert rules.known("mamba_ssm_dtype", "float32") and rules.known("mtp_use_dedicated_embeddings", False)
        assert not rules.known("mtp_use_dedicated_embeddings", True)
        assert rules.keys("mtp") == ("mtp_num_hidden_layers", "num_nextn_predict_layers")


def test_forcing_a_profile_on_the_published_exaone4_and_olmo3_configs(tmp_path: Path) -> None:
    """EXAONE-4 under qwen names the one key qwen's rules do not map; OLMo-3 under llama2 states none.

    OLMo-3's keys are all transformers' standard names (the `hf "*"` rules), so llama2 maps each
    of them and the import goes on under the forcing warning: llama2's facts, not OLMo-3's
    architecture, price it, and the warning says so.
    """
    from tests.importers.hf_configs import DATA, FILES

    (tmp_path / "config.json").write_bytes((DATA / FILES["exaone_4_0_32b"][0]).read_bytes())
    refused = _hpdsl("import-hf", "config.json", "--profile", "qwen", cwd=tmp_path)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("hpdsl: the config states sliding_window_pattern, which profile 'qwen'")
    allowed = _hpdsl("import-hf", "config.json", "--profile", "qwen", "--allow-unknown", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert "IGNORED 1 config key(s) hpdsl does not understand: sliding_window_pattern" in allowed.stderr
    assert "do not include exaone4" in allowed.stderr
    (tmp_path / "config.json").write_bytes((DATA / FILES["olmo_3_1_32b_instruct"][0]).read_bytes())
    forced = _hpdsl("import-hf", "config.json", "--profile", "llama2", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "do not include olmo3" in forced.stderr and "its facts for every model_type hold" in forced.stderr
    assert "IGNORED" not in forced.stderr and "model olmo3 : llama2" in forced.stdout


def test_a_forced_profile_stating_activation_for_its_type_yields_to_the_published_hidden_act(
        tmp_path: Path) -> None:
    """The published Llama-3.2-1B config (hidden_act silu) under a forced profile whose facts state gelu.

    The config's key wins over the profile's fact, written once (never "'activation' is stated
    twice"), and the import prices what transformers counts.
    """
    from tests.importers.hf_configs import DATA, FILES

    profile = (f'profile acts {{\n  model_types "acme_act"\n  kind decoder {{\n    {OPS.replace("ffMM 2", "ffMM 3")}'
               '\n  }\n  facts { qkv_bias = false  o_bias = false  mlp_bias = false  norm_bias = false }\n'
               '  facts "acme_act" { activation = "gelu" }\n}\n')
    (tmp_path / "acts.hpf").write_text(profile)
    (tmp_path / "config.json").write_bytes((DATA / FILES["llama_3_2_1b_instruct"][0]).read_bytes())
    imported = _hpdsl("import-hf", "config.json", "--profiles", "acts.hpf", "--profile", "acts", "--name", "m",
                      "-o", "m.hpf", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    text = (tmp_path / "m.hpf").read_text()
    assert "activation silu" in text and text.count("activation") == 1
    estimate = _hpdsl("estimate", "acts.hpf", "m.hpf", "--json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    assert json.loads(estimate.stdout)["params"]["total"] == 1_235_814_400  # tests/data/hf/counts.json


def _with_rules(*rules: str) -> tuple[Any, int]:
    """Return ACME checked with `rules` opening its hf block, and the line of the first of them."""
    block = 'hf "acme_gpt" {\n' + "".join(f"    {rule}\n" for rule in rules)
    result = check_sources([Source("acme.hpf", ACME.replace('hf "acme_gpt" {\n', block, 1))], stdlib=True)
    return result, ACME.split("\n").index('  hf "acme_gpt" {') + 2


def test_a_weight_rule_of_two_forms_or_other_placeholders_is_a_located_error() -> None:
    """`weight` rules: both sides prefixes (ending in ".") or both whole names, with the same placeholders."""
    result, first = _with_rules('weight "transformer.h.{i}." -> "layers.{i}.ffn"',
                                'weight "transformer.h.{i}.ln_1." -> "layers.{j}.mixer_norm."',
                                'weight "transformer.wte." -> "embed."')
    found = [(d.code, d.span.line) for d in result.diagnostics if d.is_error]
    assert found == [("bad-weight-name", first), ("bad-weight-name", first + 1)]
    hints = [d.hint or "" for d in result.diagnostics]
    assert any('"model.norm." -> "norm."' in h for h in hints) and any("{i}" in h for h in hints)


TRANSLATED = ACME.replace("    read activation_function\n",
                          "    read activation_function\n"
                          "    map acme_residual -> wiring { 0 -> pre_norm  1 -> post_norm }\n")


def test_a_maps_table_translates_the_configs_values_and_reads_others_as_they_are() -> None:
    """`map KEY -> FIELD { VALUE -> VALUE }`: a stated value the table names is read as the field's value it means."""
    from hpdsl.importers.hf import import_hf_config
    from hpdsl.importers.hf_config import HfImportError

    registry = check_sources([Source("acme.hpf", TRANSLATED)], stdlib=True).registry
    assert registry is not None
    profiles = dict(registry.profiles)
    gpt2 = {**CONFIGS["gpt2_large"][0], "model_type": "acme_gpt"}
    for stated, wiring in ((0, "pre_norm"), (1, "post_norm"), ("pre_norm", "pre_norm")):
        text = import_hf_config({**gpt2, "acme_residual": stated}, profiles=profiles, name="a").text
        assert f"  wiring {wiring}\n" in text, (stated, text)
    # A bool is not the table's 1: read as it is, it is no wiring, and the error names the key.
    try:
        import_hf_config({**gpt2, "acme_residual": True}, profiles=profiles, name="a")
    except HfImportError as exc:
        assert exc.field == "acme_residual" and "acme_residual is True; wiring is one of" in str(exc)
    else:
        raise AssertionError("a value neither the table nor the field names imported")


def test_a_table_value_the_field_does_not_take_or_stated_twice_is_a_located_error() -> None:
    bad = TRANSLATED.replace("{ 0 -> pre_norm  1 -> post_norm }", "{ 0 -> prenorm  0 -> pre_norm  2 -> 3 }")
    result = check_sources([Source("acme.hpf", bad)], stdlib=True)
    text = "    map acme_residual -> wiring { 0 -> prenorm  0 -> pre_norm  2 -> 3 }"
    line = bad.split("\n").index(text) + 1
    found = [(d.code, d.span.line, d.span.col) for d in result.diagnostics if d.is_error]
    columns = (text.index("prenorm") + 1, text.index("0 -> pre_norm") + 1, text.index("3 }") + 1)
    assert found == [("bad-import-value", line, col) for col in columns]
    messages = [(d.message, d.hint) for d in result.diagnostics if d.is_error]
    assert "translates 0 into prenorm, but wiring is one of pre_norm" in messages[0][0]
    assert messages[0][1] == "did you mean 'pre_norm'?"
    assert "translates 0 twice" in messages[1][0] and "translates 2 into 3" in messages[2][0]


def test_a_join_rule_of_two_forms_or_joining_and_splitting_is_a_located_error() -> None:
    result, first = _with_rules('weight join("h.{i}.q.", "h.{i}.z") -> "layers.{i}.mixer.qz."',
                                'weight join("h.{i}.b.", "h.{j}.a.") -> "layers.{i}.mixer.ba."',
                                'weight join("x", "y") -> split("p", "q") by (hidden, hidden)')
    found = [(d.code, d.span.line, d.message) for d in result.diagnostics if d.is_error]
    assert [(code, line) for code, line, _ in found] == [("bad-weight-name", first), ("bad-weight-name", first + 1),
                                                          ("bad-weight-name", first + 2)]
    assert "'h.{i}.z' to 'layers.{i}.mixer.qz.': both must be whole names or both prefixes" in found[0][2]
    assert "'h.{j}.a.' has placeholders ['j']" in found[1][2] and "both joins and splits" in found[2][2]


def test_a_pattern_names_layers_by_characters_or_by_names_not_both() -> None:
    """A string's characters ("M") or a list's entries ("mamba", Nemotron 3 Ultra's layers_block_type); a mix is located."""
    result, first = _with_rules('pattern acme_pattern { "M" -> decoder  "*" -> decoder }',
                                'pattern acme_types { "mamba" -> decoder  "attention" -> decoder }',
                                'pattern acme_mixed { "M" -> decoder  "attention" -> decoder }')
    found = [(d.code, d.span.line) for d in result.diagnostics if d.is_error]
    assert found == [("bad-pattern-symbol", first + 2)]
