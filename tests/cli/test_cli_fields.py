"""Author fields through the real CLI: declared in a profile, stated by a model, read by a family's layout.

tests/cli/data/fields/lora_ssm.hpf declares `decay_lora` in its profile; its mixer family's
layout reads it, so `hpdsl estimate` prices it and `--set decay_lora=N` changes the count.
`hpdsl import-hf` writes the fields a profile declares from its `map` and `derive` rules.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "tests" / "cli" / "data" / "fields" / "lora_ssm.hpf"
# Meta's published Llama-3.2-1B-Instruct config.json (tests/data/hf/SOURCES.md names its source).
LLAMA = ROOT / "tests" / "data" / "hf" / "llama_3_2_1b_instruct.json"


def hpdsl(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def params(*args: str) -> dict:
    run = hpdsl("estimate", *args, "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["params"]


def test_the_estimate_prices_an_author_field_a_layout_reads_and_set_changes_it() -> None:
    # The mixer: in_proj 128·64 + decay_a r·64 + decay_b 128·r + out_proj 64·128, its MLP 3·64·128, two norms.
    def mixer(rank: int) -> int:
        return 128 * 64 + rank * 64 + 128 * rank + 64 * 128 + 3 * 64 * 128 + 2 * 64

    stated = params(str(SPEC))
    assert stated["per_kind"]["mixer"]["total"] == mixer(8) == 42_624
    changed = params(str(SPEC), "--set", "decay_lora=16")
    assert changed["per_kind"]["mixer"]["total"] == mixer(16)
    assert changed["total"] - stated["total"] == mixer(16) - mixer(8) == 8 * (64 + 128)


def test_set_checks_an_author_field_against_its_declaration() -> None:
    too_big = hpdsl("estimate", str(SPEC), "--set", "decay_lora=5000")
    assert too_big.returncode == 2 and "decay_lora must be at most 4,096" in too_big.stderr
    typo = hpdsl("estimate", str(SPEC), "--set", "decay_lor=16")
    assert typo.returncode == 2 and "did you mean 'decay_lora'?" in typo.stderr


def test_a_model_that_leaves_a_read_author_field_unstated_is_refused_at_compile(tmp_path: Path) -> None:
    text = SPEC.read_text().replace("  decay_lora 8\n", "")
    (tmp_path / "spec.hpf").write_text(text)
    run = hpdsl("compile", "spec.hpf", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "missing-field" in run.stderr and "decay_lora" in run.stderr and "Traceback" not in run.stderr


def test_a_bad_declaration_is_a_located_diagnostic_with_a_hint(tmp_path: Path) -> None:
    text = SPEC.read_text().replace("field decay_lora: int >= 1 <= 4096", "field decay_lora: int >= 8 <= 4")
    (tmp_path / "spec.hpf").write_text(text)
    run = hpdsl("compile", "spec.hpf", cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "spec.hpf:5:25: error[bad-field-declaration]" in run.stderr and "hint:" in run.stderr


def test_the_registry_holds_the_declaration_and_the_model_s_value(tmp_path: Path) -> None:
    run = hpdsl("compile", str(SPEC), "-o", str(tmp_path / "registry.json"))
    assert run.returncode == 0, run.stderr
    data = json.loads((tmp_path / "registry.json").read_text())
    assert data["profiles"]["lora_ssm"]["fields"] == [{
        "name": "decay_lora", "type": "int", "meaning": "rank of the low-rank decay projection",
        "minimum": 1, "maximum": 4096}]
    assert data["models"]["lora_tiny"]["extra"] == {"decay_lora": 8}


ACME = """profile acme {
  model_types "acme_llama"
  field rope_base: float "the rotary base"
  field kv_group: int >= 1 "query heads per key/value head"
  kind decoder {
    ops { attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }
  }
  facts { qkv_bias = false  o_bias = false  mlp_bias = false  norm_bias = false }
  hf "acme_llama" {
    map rope_theta -> rope_base
    derive kv_group = heads / kv_heads
  }
}
"""


def test_import_hf_writes_the_fields_a_profile_s_rules_map_and_derive(tmp_path: Path) -> None:
    # The published config under a model_type only the author's profile lists.
    config = {**json.loads(LLAMA.read_text()), "model_type": "acme_llama"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "acme.hpf").write_text(ACME)
    run = hpdsl("import-hf", "config.json", "--profiles", "acme.hpf", "--name", "a", "-o", "a.hpf", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "a.hpf").read_text()
    assert "model a : acme" in text and "rope_base 500000.0" in text and "kv_group 4" in text
    compiled = hpdsl("compile", "acme.hpf", "a.hpf", "-o", "r.json", cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    extra = json.loads((tmp_path / "r.json").read_text())["models"]["a"]["extra"]
    assert extra == {"rope_base": 500000.0, "kv_group": 4}


def test_an_import_rule_naming_an_undeclared_field_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "acme.hpf").write_text(ACME.replace("-> rope_base", "-> rope_bse"))
    run = hpdsl("compile", "acme.hpf", cwd=tmp_path)
    assert run.returncode == 1 and "acme.hpf:10:" in run.stderr and "unknown-import-field" in run.stderr
    assert "did you mean 'rope_base'?" in run.stderr


def test_the_opt_example_of_docs_language_md_compiles_and_sets(tmp_path: Path) -> None:
    # docs/language.md, "Model fields": OPT-350m's word_embed_proj_dim, read by an author embedding's layout.
    doc = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    block = "// opt.hpf\n" + doc.split("```\n// opt.hpf\n", 1)[1].split("```", 1)[0]
    (tmp_path / "opt.hpf").write_text(block)
    assert hpdsl("fmt", "--check", "opt.hpf", cwd=tmp_path).returncode == 0
    run = hpdsl("compile", "opt.hpf", "-o", "registry.json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    data = json.loads((tmp_path / "registry.json").read_text())
    assert data["models"]["opt_350m"]["extra"] == {"word_embed_proj_dim": 512}
    assert [f["name"] for f in data["profiles"]["opt"]["fields"]] == ["word_embed_proj_dim"]
    # The embedding is priced from the author family's layout: the (vocab, 512) table plus project_in.
    for sets, width in (((), 512), (("--set", "word_embed_proj_dim=256"), 256)):
        estimate = hpdsl("estimate", "opt.hpf", "--json", *sets, cwd=tmp_path)
        assert estimate.returncode == 0, estimate.stderr
        assert json.loads(estimate.stdout)["params"]["embedding"] == 50272 * width + 1024 * width
    undeclared = block.replace("  field word_embed_proj_dim", "  // field word_embed_proj_dim")
    (tmp_path / "opt.hpf").write_text(undeclared)
    refused = hpdsl("compile", "opt.hpf", cwd=tmp_path)
    assert refused.returncode == 1 and refused.stderr.count("unknown-dim-field") == 2
    assert "unknown-field" in refused.stderr
