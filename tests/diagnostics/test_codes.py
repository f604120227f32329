"""The diagnostic code table and its generated documentation stay in step."""

from __future__ import annotations

import re
from pathlib import Path

from hpdsl.diagnostics.codes import CODES, render_table

ROOT = Path(__file__).resolve().parents[2]


def test_docs_table_is_generated_from_the_code_table() -> None:
    assert (ROOT / "docs" / "diagnostics.md").read_text() == render_table(), \
        "regenerate with: python -m hpdsl.diagnostics.codes > docs/diagnostics.md"


def test_codes_are_kebab_case() -> None:
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", code) for code in CODES)


def test_case_files_exercise_at_least_forty_distinct_error_codes() -> None:
    found = set()
    for path in (ROOT / "tests" / "cases").rglob("*.hpf"):
        for match in re.finditer(r"(?://|#)\s*E:\s*([a-z0-9, -]+)", path.read_text()):
            found.update(code.strip() for code in match.group(1).split(","))
    assert found <= set(CODES)
    assert len(found) >= 40, sorted(found)
