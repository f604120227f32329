"""Comments and docs cite only files of this repository, and every cited heading exists.

A citation is `docs/<name>.md#<anchor>` anywhere in a source, .hpf or doc file, or a relative
Markdown link `[text](<name>.md#<anchor>)` in a doc. Anchors are GitHub's heading slugs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("hpdsl", "profiles", "families", "examples", "bench", "docs", "grammar", "README.md")
TEXT_SUFFIXES = {".py", ".hpf", ".md", ".lark", ".json", ".toml", ".txt", ".yaml", ".yml"}

CITATION = re.compile(r"\bdocs/([\w.-]+\.md)#([\w-]+)")
MD_LINK = re.compile(r"\]\(([\w./-]*\.md)#([\w-]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def text_files(roots: tuple[str, ...]) -> Iterator[Path]:
    """Yield every text file under the given repository paths, in a stable order."""
    for name in roots:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in candidates:
            if file.is_file() and file.suffix in TEXT_SUFFIXES and "__pycache__" not in file.parts:
                yield file


def slug(heading: str) -> str:
    """Return GitHub's anchor for a heading's text."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(doc: Path) -> frozenset[str]:
    """Return the anchors of a Markdown file's headings (code blocks skipped, repeats numbered)."""
    seen: dict[str, int] = {}
    found = set()
    in_code = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_code = not in_code
            continue
        match = HEADING.match(line)
        if in_code or match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def citations(file: Path) -> Iterator[tuple[Path, str, str]]:
    """Yield (target file, anchor, cited text) for each docs citation in `file`."""
    text = file.read_text(encoding="utf-8")
    for match in CITATION.finditer(text):
        yield ROOT / "docs" / match.group(1), match.group(2), match.group(0)
    if file.suffix == ".md":
        for match in MD_LINK.finditer(text):
            yield (file.parent / match.group(1)).resolve(), match.group(2), match.group(0)


def relative(path: Path) -> str:
    """Return `path` relative to the repository root, for messages."""
    return str(path.relative_to(ROOT))


def test_nothing_cites_the_external_domain_notes() -> None:
    offenders = [relative(file) for file in text_files(SCANNED)
                 if "domain.md" in file.read_text(encoding="utf-8")]
    assert offenders == [], f"these files cite domain.md, which is not in the repository: {offenders}"


def test_scan_finds_the_citations() -> None:
    # Guards the two tests here against a scan that silently finds nothing.
    cited = {(relative(target), anchor) for file in text_files(SCANNED)
             for target, anchor, _ in citations(file)}
    assert ("docs/reference.md", "run-facts") in cited
    assert ("docs/cost-model.md", "where-hpdsl-departs-from-upstream-and-why") in cited


@pytest.mark.parametrize("roots", [SCANNED, ("tests",)], ids=["sources-and-docs", "tests"])
def test_every_cited_doc_heading_exists(roots: tuple[str, ...]) -> None:
    broken = []
    for file in text_files(roots):
        for target, anchor, cited in citations(file):
            if not target.is_file():
                broken.append(f"{relative(file)}: {cited}: no such file")
            elif anchor not in anchors(target):
                broken.append(f"{relative(file)}: {cited}: {relative(target)} has no heading #{anchor}")
    assert broken == [], "\n".join(broken)


def test_slug_follows_github() -> None:
    assert slug("Binding (`hpdsl/cost/bind.py`)") == "binding-hpdslcostbindpy"
    assert slug("Where hpdsl departs from upstream, and why") == "where-hpdsl-departs-from-upstream-and-why"
    assert slug("FLOPs are linear in the op counts") == "flops-are-linear-in-the-op-counts"
