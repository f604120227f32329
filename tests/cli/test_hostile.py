"""Hostile input ends in a clear, located answer in bounded time and output (docs/trust.md#hostile-input)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpdsl.api import check_paths, check_sources
from hpdsl.diagnostics import Source, render_diagnostics
from hpdsl.diagnostics.diagnostic import MAX_PER_FILE
from hpdsl.diagnostics.render import WINDOW
from hpdsl.errors import SpecError
from hpdsl.loader import MAX_IMPORT_DEPTH
from hpdsl.syntax import parse_text
from hpdsl.syntax.parser import MAX_FILE_CHARS, MAX_LINE_CHARS


def _codes(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_text(text, "case.hpf")
    return [d.code for d in caught.value.diagnostics]


def test_a_file_over_the_cap_is_one_located_error() -> None:
    assert _codes("// x\n" * (MAX_FILE_CHARS // 5 + 1)) == ["file-too-large"]


def test_a_line_over_the_cap_is_an_error_at_the_column_past_it() -> None:
    with pytest.raises(SpecError) as caught:
        parse_text("\n// " + "x" * MAX_LINE_CHARS, "case.hpf")
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.code == "line-too-long"
    assert (diagnostic.span.line, diagnostic.span.col) == (2, MAX_LINE_CHARS + 1)


def test_2_62_is_held_and_one_more_is_not() -> None:
    parse_text(f"model m {{ hidden {1 << 62} }}")
    assert _codes(f"model m {{ hidden {(1 << 62) + 1} }}") == ["literal-too-large"]


def test_duplicate_fields_on_one_line_print_in_bounded_output() -> None:
    line = "model m : qwen { hidden 8  layers 2  heads 2  vocab 8  ffn_width 8 " + "heads 2 " * 1200 + "}"
    start = time.perf_counter()
    result = check_sources([Source("case.hpf", line)])
    text = render_diagnostics(result.diagnostics, result.sources)
    assert time.perf_counter() - start < 2
    codes = [d.code for d in result.diagnostics]
    assert codes.count("duplicate-field") == MAX_PER_FILE
    assert codes[-1] == "too-many-diagnostics"
    assert "1,100 more problems in case.hpf" in result.diagnostics[-1].message
    assert not result.ok
    assert len(text) < MAX_PER_FILE * 3 * (WINDOW + 200)


def test_a_long_line_is_shown_as_a_window_around_the_caret() -> None:
    line = "model m : qwen { hidden 8  layers 2  heads 2  vocab 8  ffn_width 8 " + " " * 5000 + "bogus 1 }"
    result = check_sources([Source("case.hpf", line)])
    (diagnostic,) = [d for d in result.diagnostics if d.code == "unknown-field"]
    excerpt = render_diagnostics([diagnostic], result.sources).split("\n")[1:3]
    source_line, caret_line = excerpt
    assert len(source_line) < WINDOW + 20
    assert source_line.startswith("   1 | ...")
    caret = caret_line.index("^")
    assert source_line[caret:caret + 5] == "bogus"


def _family(selectors: int, overlap: bool) -> str:
    names = [f"s{i:02}" for i in range(1, selectors + 1)]
    body = "\n".join(f"  selector {n}: bool" for n in names)
    when_b = f"{names[0]} and {names[-1]}" if overlap else f"not {names[0]} and {names[-1]}"
    return (f"family wide {{\n  factory \"pkg.mod:A\"\n{body}\n"
            f"  require {' or '.join(names)}\n"
            f"  variant a \"pkg.mod:A\" when {names[0]}\n"
            f"  variant b \"pkg.mod:B\" when {when_b}\n"
            f"  variant rest \"pkg.mod:C\" default\n}}\n")


def test_a_planted_overlap_in_a_huge_domain_does_not_compile() -> None:
    start = time.perf_counter()
    result = check_sources([Source("case.hpf", _family(30, overlap=True))], stdlib=False)
    assert time.perf_counter() - start < 2
    assert [d.code for d in result.errors] == ["variant-overlap"]


def test_a_small_family_is_still_checked_exactly() -> None:
    result = check_sources([Source("case.hpf", _family(6, overlap=True))], stdlib=False)
    assert [d.code for d in result.errors] == ["variant-overlap"]


def test_a_chain_of_imports_past_the_cap_is_an_error_at_the_import(tmp_path: Path) -> None:
    # 3,000 files each importing the next: the loader's depth-first walk stops at MAX_IMPORT_DEPTH
    # with a located error (it used to run out of Python's recursion and exit 3).
    sources = [Source(str(tmp_path / f"chain{i}.hpf"), f'import "chain{i + 1}.hpf"\n') for i in range(3000)]
    sources.append(Source(str(tmp_path / "chain3000.hpf"), "// the end\n"))
    started = time.process_time()
    result = check_sources(sources)
    assert time.process_time() - started < 10
    first = [d for d in result.diagnostics if d.code == "import-too-deep"
             and d.span.file == str(tmp_path / f"chain{MAX_IMPORT_DEPTH - 1}.hpf")]
    assert len(first) == 1 and (first[0].span.line, first[0].span.col) == (1, 8)
    assert f"more than the {MAX_IMPORT_DEPTH}" in first[0].message
    assert not result.ok


def test_a_chain_of_imports_within_the_cap_loads(tmp_path: Path) -> None:
    for i in range(MAX_IMPORT_DEPTH - 1):
        (tmp_path / f"chain{i}.hpf").write_text(f'import "chain{i + 1}.hpf"\n')
    (tmp_path / f"chain{MAX_IMPORT_DEPTH - 1}.hpf").write_text("// the end\n")
    result = check_paths([tmp_path / "chain0.hpf"])
    assert result.ok, result.diagnostics


# Found by bench/fuzz.py (compile, seed 3, input 9255): an import path past the system's name
# limit raised OSError (ENAMETOOLONG) from Path.is_dir and exited 3.
def test_an_import_path_too_long_for_the_system_is_a_located_error(tmp_path: Path) -> None:
    name = "x" * 5000
    result = check_sources([Source(str(tmp_path / "long.hpf"), f'import "{name}"\nimport "{name}.hpf"\n')])
    assert [(d.code, d.span.line, d.span.col) for d in result.errors] == [("import-not-found", 1, 8),
                                                                          ("import-not-found", 2, 8)]


def test_a_path_too_long_for_the_system_exits_2(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "hpdsl", "compile", "a" * 5000], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith("hpdsl: 'aaaa") and len(run.stderr) < 400


# Found by bench/fuzz.py (fmt, seed 6, input 12716): a shipped file with runs of its lines repeated,
# just under the old 1 MiB cap, took 3 s to format. The cap (128 KiB) bounds parse, check and format.
def test_a_file_at_the_size_cap_parses_checks_and_formats_in_bounded_time() -> None:
    from hpdsl.fmt import format_file
    from hpdsl.syntax import parse_source
    from hpdsl.syntax.parser import MAX_FILE_CHARS

    spec = (Path(__file__).resolve().parents[2] / "examples" / "llama3_8b.hpf").read_text()
    body = spec[spec.index("model"):spec.rindex("}")]  # the model's fields, repeated: duplicate-field errors
    text = spec[:spec.rindex("}")] + body * ((MAX_FILE_CHARS - len(spec)) // len(body)) + "}\n"
    assert MAX_FILE_CHARS - len(body) <= len(text) <= MAX_FILE_CHARS
    started = time.process_time()
    result = check_sources([Source("big.hpf", text)])
    assert time.process_time() - started < 2 and not result.ok
    started = time.process_time()
    try:
        format_file(parse_source(Source("big.hpf", text)))
    except SpecError:
        pass
    assert time.process_time() - started < 2
