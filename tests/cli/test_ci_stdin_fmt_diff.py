"""`-` reads standard input for `compile` and `fmt`; `fmt --diff` prints a unified diff and exits 1 if unformatted."""

from __future__ import annotations

import json
from pathlib import Path

from ci_support import LLAMA, REPO, SCHEMAS, hpdsl

import jsonschema

UGLY = "model m : llama2 {\n   hidden 4096 layers 2 heads 32 kv_heads 8 vocab 1000 ffn_width 100\n}\n"
PRETTY = ("model m : llama2 {\n  hidden 4096\n  layers 2\n  heads 32\n  kv_heads 8\n  vocab 1000\n"
          "  ffn_width 100\n}\n")


def test_fmt_dash_writes_the_formatted_text_to_stdout() -> None:
    run = hpdsl("fmt", "-", stdin=UGLY)
    assert run.returncode == 0, run.stderr
    assert run.stdout == PRETTY
    assert hpdsl("fmt", "-", stdin=PRETTY).stdout == PRETTY


def test_fmt_check_of_stdin_names_it() -> None:
    run = hpdsl("fmt", "--check", "-", stdin=UGLY)
    assert run.returncode == 1 and run.stdout == "would reformat <stdin>\n"
    assert hpdsl("fmt", "--check", "-", stdin=PRETTY).returncode == 0


def test_compile_dash_checks_stdin_with_located_diagnostics() -> None:
    ok = hpdsl("compile", "-", stdin=UGLY)
    assert ok.returncode == 0 and ok.stdout.startswith("ok: ") and "1 model" in ok.stdout
    bad = hpdsl("compile", "-", stdin="model x : nope {}\n")
    assert bad.returncode == 1
    assert "<stdin>:1:11: error[unknown-profile]" in bad.stderr


def test_compile_dash_writes_a_registry(tmp_path: Path) -> None:
    run = hpdsl("compile", "-", "-o", "registry.json", stdin=Path(LLAMA).read_text(encoding="utf-8"),
                cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "llama3_8b" in json.loads((tmp_path / "registry.json").read_text(encoding="utf-8"))["models"]


def test_dash_with_other_paths_or_with_write_is_a_usage_error() -> None:
    mixed = hpdsl("compile", "-", LLAMA, stdin=UGLY)
    assert mixed.returncode == 2 and "give it alone" in mixed.stderr
    write = hpdsl("fmt", "--write", "-", stdin=UGLY)
    assert write.returncode == 2 and "--write cannot rewrite standard input" in write.stderr


def test_stdin_that_is_not_utf8_is_a_usage_error() -> None:
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "hpdsl.cli", "fmt", "-"], input=b"model \xff\n",
                         capture_output=True, check=False, timeout=120)
    assert run.returncode == 2
    assert b"cannot read '<stdin>': not UTF-8 (byte 6)" in run.stderr and b"Traceback" not in run.stderr


def test_fmt_diff_prints_a_unified_diff_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "ugly.hpf").write_text(UGLY, encoding="utf-8")
    (tmp_path / "pretty.hpf").write_text(PRETTY, encoding="utf-8")
    run = hpdsl("fmt", "--diff", "ugly.hpf", "pretty.hpf", cwd=tmp_path)
    assert run.returncode == 1
    assert run.stdout.splitlines()[:3] == ["--- a/ugly.hpf", "+++ b/ugly.hpf", "@@ -1,3 +1,8 @@"]
    assert "-   hidden 4096 layers 2" in run.stdout and "+  ffn_width 100" in run.stdout
    assert "pretty.hpf" not in run.stdout
    assert (tmp_path / "ugly.hpf").read_text(encoding="utf-8") == UGLY  # nothing changed
    clean = hpdsl("fmt", "--diff", "pretty.hpf", cwd=tmp_path)
    assert clean.returncode == 0 and clean.stdout == ""


def test_fmt_diff_applies_with_patch_to_the_formatted_text(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "ugly.hpf").write_text(UGLY.rstrip("\n"), encoding="utf-8")  # no final newline either
    diff = hpdsl("fmt", "--diff", "ugly.hpf", cwd=tmp_path).stdout
    applied = subprocess.run(["git", "apply", "-"], input=diff, text=True, cwd=tmp_path, capture_output=True,
                             check=False)
    assert applied.returncode == 0, applied.stderr
    assert (tmp_path / "ugly.hpf").read_text(encoding="utf-8") == PRETTY


def test_fmt_diff_json_carries_the_diffs_and_validates(tmp_path: Path) -> None:
    (tmp_path / "ugly.hpf").write_text(UGLY, encoding="utf-8")
    run = hpdsl("fmt", "--diff", "ugly.hpf", "--json", cwd=tmp_path)
    assert run.returncode == 1
    data = json.loads(run.stdout)
    schema = json.loads((SCHEMAS / "fmt.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    assert data["changed"] == ["ugly.hpf"] and data["diffs"]["ugly.hpf"].startswith("--- a/ugly.hpf\n")


def test_fmt_diff_and_write_is_a_usage_error() -> None:
    run = hpdsl("fmt", "--diff", "--write", str(REPO / "examples"))
    assert run.returncode == 2 and "--diff and --write cannot be used together" in run.stderr
