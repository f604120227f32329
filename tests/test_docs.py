"""Comments and docs cite only files of this repository, every cited heading exists, every link resolves.

A citation is `docs/<name>.md#<anchor>` anywhere in a source, .hpf or doc file, or a relative
Markdown link `[text](<name>.md#<anchor>)` in a doc. Anchors are GitHub's heading slugs. Every
relative link of README.md, CONTRIBUTING.md and docs/*.md names a file that exists, and a heading
of it where it has an anchor. README.md is one page (at most README_MAX_LINES) that opens with the
two set-up commands .ci/run runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("hpdsl", "profiles", "families", "examples", "bench", "docs", "grammar", "README.md", "CONTRIBUTING.md")
TEXT_SUFFIXES = {".py", ".hpf", ".md", ".lark", ".json", ".toml", ".txt", ".yaml", ".yml"}

CITATION = re.compile(r"\bdocs/([\w.-]+\.md)#([\w-]+)")
MD_LINK = re.compile(r"\]\(([\w./-]*\.md)#([\w-]+)\)")
FENCE = re.compile(r"^\s*(`{3,}(?!.*`)|~{3,})")
"""A code fence (a backtick fence's info string has no backtick: "```` ```hpdsl ````" is inline code)."""
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"(`+).+?\1")
URL = re.compile(r"^[a-z][a-z0-9+.-]*:")
README_MAX_LINES = 250
"""The README is one page (what hpdsl is, the set-up commands, a short tour, links); docs/ is the manual."""


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
    """Return `path` relative to the repository root (as it is, outside it), for messages."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


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


def linked_docs() -> list[Path]:
    """Return the Markdown files whose relative links must resolve."""
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def links(doc: Path) -> Iterator[tuple[int, str]]:
    """Yield (line number, target) for each Markdown link or image outside code blocks and code spans."""
    in_code = False
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            in_code = not in_code
            continue
        if not in_code:
            for match in LINK.finditer(CODE_SPAN.sub("", line)):
                yield number, match.group(1)


def broken_link(doc: Path, target: str) -> str | None:
    """Return why a relative link of `doc` does not resolve, or None where it does."""
    path, _, anchor = target.partition("#")
    file = (doc.parent / path).resolve() if path else doc
    if not file.exists():
        return f"no such file {path}"
    if anchor and (file.suffix != ".md" or anchor not in anchors(file)):
        return f"{relative(file)} has no heading #{anchor}"
    return None


def test_every_relative_link_resolves() -> None:
    broken, checked, anchored = [], 0, 0
    for doc in linked_docs():
        for number, target in links(doc):
            if URL.match(target):
                continue
            checked += 1
            anchored += "#" in target
            problem = broken_link(doc, target)
            if problem is not None:
                broken.append(f"{relative(doc)}:{number}: ({target}): {problem}")
    assert broken == [], "\n".join(broken)
    assert checked > 50 and anchored > 20, f"the scan found only {checked} links ({anchored} with anchors)"


def test_broken_links_are_found(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("# A page\n\n## Its part\n\n[ok](#its-part) [gone](missing.md) [bad](#no-part)\n"
                   "`[code](missing.md)`\n```\n[fenced](missing.md)\n```\n", encoding="utf-8")
    targets = [target for _, target in links(doc)]
    assert targets == ["#its-part", "missing.md", "#no-part"]
    assert [broken_link(doc, target) is None for target in targets] == [True, False, False]


def test_the_readme_is_one_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, more than {README_MAX_LINES}: move the detail into docs/")


def test_the_readme_opens_with_the_commands_ci_runs() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.match(r"# hpdsl\n\n```sh\n(.*?)\n```\n", text, re.S)
    assert match is not None, "README.md must open with its title and the ```sh block of the two set-up commands"
    commands = match.group(1).splitlines()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert len(commands) == 2 and commands == [line for line in ci if line in commands], (
        f"README.md's set-up commands {commands} are not the lines .ci/run runs")
