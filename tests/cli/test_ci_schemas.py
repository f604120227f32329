"""Every `--json` output carries `schema_version` and validates against docs/schemas/<command>.schema.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ci_support import EXAMPLES, LLAMA, SCHEMAS, hpdsl, json_of, variant
from hpdsl.cli.app import COMMANDS, main
from hpdsl.cli.json_output import SCHEMA_VERSION
from tests.importers.hf_configs import CONFIGS

DATA = Path(__file__).resolve().parent / "data"


def valid(data: Any, command: str) -> Any:
    """Assert `data` carries the schema version and validates against the command's schema; return it."""
    schema = json.loads((SCHEMAS / f"{command}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    assert next(iter(data)) == "schema_version" and data["schema_version"] == SCHEMA_VERSION
    return data


def test_every_command_with_json_has_a_schema() -> None:
    ctx = main.make_context("hpdsl", ["--help"], resilient_parsing=True)
    with_json = {name for name in COMMANDS
                 if any(p.name == "as_json" for p in main.get_command(ctx, name).params)}  # type: ignore[union-attr]
    assert with_json >= {"estimate", "search", "diff", "stack", "train", "compile", "explain"}
    schemas = {path.name.removesuffix(".schema.json") for path in SCHEMAS.glob("*.schema.json")}
    assert schemas == with_json | {"error"}


def test_estimate_json_validates() -> None:
    data = valid(json_of("estimate", LLAMA, "--tp", "8", "--pp", "2", "--json"), "estimate")
    assert data["strategy"]["tp"] == 8 and len(data["memory"]["per_stage"]) == 2


def test_the_device_time_model_and_a_cluster_validate() -> None:
    data = valid(json_of("estimate", LLAMA, "--tp", "8", "--mfu", "0", "--cluster", "dgx_h100", "--json"),
                 "estimate")
    assert data["machine"]["cluster"] == "dgx_h100" and data["time_breakdown"]["compute_s"] > 0
    found = valid(json_of("search", LLAMA, "--devices", "16", "--mfu", "0", "--top", "2", "--json"), "search")
    assert found["machine"]["device"] == "h100_sxm" and all("machine" not in row for row in found["top"])


def test_search_json_validates_and_has_no_wall_clock_unless_asked() -> None:
    data = valid(json_of("search", LLAMA, "--devices", "8", "--top", "2", "--json"), "search")
    assert len(data["top"]) == 2 and "seconds" not in data
    again = json_of("search", LLAMA, "--devices", "8", "--top", "2", "--json")
    assert again == data  # nothing time-dependent: two runs print the same object
    timed = valid(json_of("search", LLAMA, "--devices", "8", "--top", "2", "--json", "--timings"), "search")
    assert timed["seconds"] >= 0 and {k: v for k, v in timed.items() if k != "seconds"} == data


def test_diff_json_validates(tmp_path: Path) -> None:
    shorter = variant(tmp_path, "layers 32 ", "layers 30 ")
    data = valid(json_of("diff", LLAMA, str(shorter), "--tp", "2", "--json"), "diff")
    assert data["models"]["llama3_8b"]["changed"] is True


def test_stack_json_validates() -> None:
    data = valid(json_of("stack", str(EXAMPLES / "deepseek_v3.hpf"), "--json"), "stack")
    assert data["mtp"] == 1


def test_compile_and_fmt_json_validate() -> None:
    valid(json_of("compile", LLAMA, "--json"), "compile")
    valid(json_of("compile", LLAMA, "--format", "json"), "compile")
    data = valid(json_of("fmt", LLAMA, "--json"), "fmt")
    assert len(data["formatted"]) == 1 and not data["changed"]
    valid(json_of("fmt", "--check", LLAMA, "--json"), "fmt")


def test_a_failure_in_json_mode_validates_against_the_error_schema(tmp_path: Path) -> None:
    data = valid(json_of("estimate", str(tmp_path / "missing.hpf"), "--json", code=2), "error")
    assert data["error"]["kind"] == "usage"
    broken = tmp_path / "broken.hpf"
    broken.write_text("model x : llama2 {\n  layers -1\n}\n", encoding="utf-8")
    spec = valid(json_of("compile", str(broken), "--json", code=1), "compile")
    assert spec["ok"] is False and spec["diagnostics"]


def test_import_hf_json_validates(tmp_path: Path) -> None:
    config, _ = CONFIGS["qwen3_0_6b"]
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    data = valid(json_of("import-hf", "config.json", "--name", "qwen3_0_6b", "--json", cwd=tmp_path), "import-hf")
    assert data["model"] == "qwen3_0_6b"


def test_explain_json_validates_both_shapes() -> None:
    pytest.importorskip("torch")
    deepseek = str(EXAMPLES / "deepseek_v3.hpf")
    built = valid(json_of("explain", deepseek, "--path", "layers.5.ffn.experts", "--ep", "8", "--json"), "explain")
    assert built["family"] == "grouped_experts"
    inside = valid(json_of("explain", LLAMA, "--path", "layers", "--json"), "explain")
    assert inside["family"] is None and inside["families_inside"]


def test_a_saved_train_run_validates() -> None:
    # The real output of `hpdsl train examples/mixtral_8x7b.hpf --set layers=2 --set hidden=64 --set heads=4
    # --set kv_heads=2 --set vocab=128 --set ffn_width=96 --set experts=4 --set expert_width=32 --nproc 1
    # --steps 1 --json` (the live run is test_a_live_train_run_validates).
    data = valid(json.loads((DATA / "train.json").read_text(encoding="utf-8")), "train")
    assert data["ranks"][0]["measured"]["params_bytes"] == data["ranks"][0]["estimated"]["params_bytes"]


@pytest.mark.slow
def test_a_live_train_run_validates() -> None:
    pytest.importorskip("torch")
    small = [f"--set={pair}" for pair in ("layers=2", "hidden=64", "heads=4", "kv_heads=2", "vocab=128",
                                          "ffn_width=96", "experts=4", "expert_width=32")]
    data = valid(json_of("train", str(EXAMPLES / "mixtral_8x7b.hpf"), *small, "--nproc", "1", "--steps", "1",
                         "--json"), "train")
    assert len(data["loss"]) == 1
