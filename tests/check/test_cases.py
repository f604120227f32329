"""The .hpf case files under tests/cases carry their expected diagnostics inline.

A line ending in `// E: code` (or `// W: code` for a warning, or both: `// E: a  W: b`; several codes
separated by commas) expects exactly those diagnostics on that line. A case file
whose first line is `// hpdsl-test: no-stdlib` is checked alone; the others are
checked together with the standard profiles and families.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpdsl.check import check_files
from hpdsl.diagnostics import Source, render_diagnostics
from hpdsl.errors import SpecError
from hpdsl.resources import stdlib_files
from hpdsl.syntax import parse_source

CASES = Path(__file__).resolve().parents[1] / "cases"
EXPECT = re.compile(r"(?://|#)\s*([EW]:.*)$")
GROUP = re.compile(r"([EW]):\s*([a-z0-9, -]+?)\s*(?=[EW]:|$)")


def _expectations(source: Source) -> set[tuple[int, str, str]]:
    expected = set()
    for number, line in enumerate(source.text.splitlines(), start=1):
        match = EXPECT.search(line)
        for group in GROUP.finditer(match.group(1) if match else ""):
            severity = "error" if group.group(1) == "E" else "warning"
            for code in group.group(2).split(","):
                expected.add((number, severity, code.strip()))
    return expected


def _diagnose(source: Source) -> list:
    sources = [source]
    if not source.text.startswith("// hpdsl-test: no-stdlib"):
        sources += [Source(name, path.read_text()) for name, path in stdlib_files()]
    files, diagnostics = [], []
    for src in sources:
        try:
            files.append(parse_source(src))
        except SpecError as error:
            diagnostics.extend(error.diagnostics)
    if not diagnostics:
        diagnostics.extend(check_files(files)[1])
    return diagnostics


def case_files() -> list[Path]:
    """Return every case file, sorted."""
    return sorted(CASES.rglob("*.hpf"))


@pytest.mark.parametrize("path", case_files(), ids=lambda p: str(p.relative_to(CASES)))
def test_case(path: Path) -> None:
    source = Source(str(path.relative_to(CASES)), path.read_text())
    diagnostics = _diagnose(source)
    found = {(d.span.line, d.severity, d.code) for d in diagnostics if d.span.file == source.name}
    foreign = [d for d in diagnostics if d.span.file != source.name]
    rendered = render_diagnostics(diagnostics, {source.name: source})
    assert not foreign, rendered
    assert found == _expectations(source), rendered
