"""Editor support: the Pygments lexer and the TextMate grammar tokenise every shipped .hpf cleanly."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHIPPED = sorted(p for folder in ("profiles", "families", "examples")
                 for p in (REPO / folder).glob("*.hpf"))
VSCODE = REPO / "editors/vscode"
TM = json.loads((VSCODE / "syntaxes/hpdsl.tmLanguage.json").read_text())


def grammar_keywords() -> set[str]:
    """Return every word the grammar spells out as a literal token."""
    text = (REPO / "grammar/hpdsl.lark").read_text()
    code = "\n".join(line.split("//", 1)[0] for line in text.splitlines())
    return set(re.findall(r'"([a-z_]+)"', code)) - {"true", "false"}


def test_shipped_files_exist() -> None:
    assert len(SHIPPED) >= 20


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_pygments_lexer_has_no_error_tokens(path: Path) -> None:
    pytest.importorskip("pygments")
    from pygments.token import Error, Keyword, Name

    from hpdsl.pygments_lexer import HpdslLexer

    text = path.read_text()
    tokens = list(HpdslLexer().get_tokens(text))
    assert [value for token, value in tokens if token in Error] == []
    assert "".join(value for _, value in tokens).rstrip("\n") == text.rstrip("\n")
    assert any(token in Keyword for token, _ in tokens)
    assert any(token in Name for token, _ in tokens)


def test_lexer_keywords_are_the_grammar_s() -> None:
    pytest.importorskip("pygments")
    from hpdsl.pygments_lexer import KEYWORDS

    assert set(KEYWORDS) == grammar_keywords()


def test_lexer_is_the_declared_entry_point() -> None:
    pytest.importorskip("pygments")
    if sys.version_info < (3, 11):
        pytest.skip("tomllib is 3.11+")
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    module, _, name = project["entry-points"]["pygments.lexers"]["hpdsl"].partition(":")
    lexer = getattr(importlib.import_module(module), name)
    assert lexer.name == "hpdsl" and "*.hpf" in lexer.filenames


def tm_patterns() -> list[re.Pattern[str]]:
    """Return the grammar's top-level match patterns in order, includes followed."""
    out = []
    for include in TM["patterns"]:
        rule = TM["repository"][include["include"].lstrip("#")]
        for leaf in rule.get("patterns", [rule]):
            out.append(re.compile(leaf["match"]))
    return out


def test_textmate_keywords_are_the_grammar_s() -> None:
    keyword = TM["repository"]["keyword"]["match"]
    assert set(keyword.removeprefix(r"\b(").removesuffix(r")\b").split("|")) == grammar_keywords()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_textmate_grammar_covers_every_character(path: Path) -> None:
    patterns = tm_patterns()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        col = 0
        while col < len(line):
            if line[col].isspace():
                col += 1
                continue
            match = next((m for p in patterns if (m := p.match(line, col)) and m.end() > col), None)
            assert match is not None, f"{path.name}:{number}:{col + 1}: no rule matches {line[col:]!r}"
            col = match.end()


def test_vscode_extension_points_at_its_files() -> None:
    package = json.loads((VSCODE / "package.json").read_text())
    [grammar] = package["contributes"]["grammars"]
    assert grammar["scopeName"] == TM["scopeName"]
    for relative in (grammar["path"], package["main"],
                     package["contributes"]["languages"][0]["configuration"]):
        assert (VSCODE / relative).is_file()
    assert package["contributes"]["configuration"]["properties"]["hpdsl.server.command"][
        "default"] == ["hpdsl", "lsp"]
    json.loads((VSCODE / "language-configuration.json").read_text())
