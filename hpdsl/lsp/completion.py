"""Completion: what may be written at the cursor, from the block the cursor is in.

The block is read from the text before the cursor (the words before each open
`{`), not from the AST, because a file being typed rarely parses. Inside a model
the model fields and blocks are offered; inside `moe { }`, `linear { }` or
`mla { }` that block's fields (hpdsl/model/fields.py); in a kind's `ops { }` the
vocabulary's op names; in `slots { }` slot and family names; after `:` in a model
header the profiles; after `from` or `default`, in a stack or layer_types, kinds.
"""

from __future__ import annotations

import re

import attrs

from hpdsl import ast
from hpdsl.lsp.analysis import Analysis
from hpdsl.model.fields import BLOCKS, FIELDS, block_fields
from hpdsl.model.slots import SLOTS

TOP_LEVEL = ("import", "vocabulary", "slots", "profile", "family", "model", "device", "cluster")
PROFILE_ITEMS = ("kind", "default", "run", "model", "facts", "model_types", "slots")
KIND_ITEMS = ("ops", "attention", "ffn", "slots")
FAMILY_ITEMS = ("factory", "parallel", "selector", "require", "variant", "layout")
MODEL_EXTRAS = ("stack", "layer_types")

@attrs.frozen
class Item:
    """One completion: its label, what it is (keyword, field, kind, ...) and a one-line detail."""

    label: str
    kind: str
    detail: str = ""


def complete(analysis: Analysis, text: str, line: int, col: int) -> list[Item]:
    """Return the completions at a 1-based position of `text` (the document as the editor has it)."""
    before = _text_before(text, line, col)
    current = before.rsplit("\n", 1)[-1]
    blocks = _open_blocks(before)
    if re.search(r"\bmodel\s+\w+\s*:\s*\w*$", current):
        return _names(analysis, ast.Profile, "profile")
    if re.search(r"\b(from|default)\s+\w*$", current) or _in_stack(before):
        return _kinds(analysis)
    if not blocks:
        return [Item(word, "keyword") for word in TOP_LEVEL]
    return _in_block(analysis, blocks)


def _in_stack(before: str) -> bool:
    """Return whether the cursor is inside a `stack [...]` or `layer_types [...]` list."""
    match = re.search(r"\b(?:stack|layer_types)\s*(\[[^{}]*)$", _strip(before))
    return match is not None and match.group(1).count("[") > match.group(1).count("]")


def _text_before(text: str, line: int, col: int) -> str:
    lines = text.split("\n")
    return "\n".join([*lines[:line - 1], lines[line - 1][:col - 1] if line <= len(lines) else ""])


def _open_blocks(before: str) -> list[str]:
    """Return the header word of every block open at the end of `before`, outermost first."""
    stack: list[str] = []
    start = 0
    text = _strip(before)
    for index, char in enumerate(text):
        if char == "{":
            stack.append(_header(text[start:index].split()))
        if char in "{}\n":
            stack = stack[:-1] if char == "}" else stack
            start = index + 1
    return stack


def _header(words: list[str]) -> str:
    """Return a block's header: a declaration's keyword (`kind a from b {`), else the last word (`moe {`)."""
    if not words:
        return ""
    return words[0] if words[0] in (*TOP_LEVEL, *PROFILE_ITEMS, *KIND_ITEMS) else words[-1]


def _strip(text: str) -> str:
    """Return the text with comments and strings blanked (same length), so braces in them do not count."""
    return re.sub(r'//[^\n]*|"(?:[^"\\\n]|\\.)*"', lambda m: " " * len(m.group(0)), text)


def _in_block(analysis: Analysis, blocks: list[str]) -> list[Item]:
    inner = blocks[-1]
    outer = blocks[0]
    if inner in BLOCKS and outer == "model":
        return [Item(n, "field", f.meaning) for n, f in block_fields(inner).items()]
    if inner == "ops":
        return _ops(analysis)
    if inner == "slots":
        return ([Item(n, "slot", s.meaning) for n, s in SLOTS.items()]
                + _names(analysis, ast.Family, "family"))
    if outer == "model" and len(blocks) == 1:
        fields = [Item(n, "field", f.meaning) for n, f in FIELDS.items() if f.block is None]
        return fields + [Item(b, "keyword", f"the {b} block") for b in (*BLOCKS, *MODEL_EXTRAS)]
    if inner in ("profile", "kind"):
        return [Item(w, "keyword") for w in (KIND_ITEMS if inner == "kind" else PROFILE_ITEMS)]
    if outer == "family":
        selectors = [Item(s.name.value, "selector") for f, _ in analysis.declarations(ast.Family)
                     for s in f.items if isinstance(s, ast.Selector)]
        return [Item(w, "keyword") for w in FAMILY_ITEMS] + selectors
    return []


def _names(analysis: Analysis, cls: type, what: str) -> list[Item]:
    return [Item(node.name.value, what) for node, _ in analysis.declarations(cls)]


def _kinds(analysis: Analysis) -> list[Item]:
    seen: dict[str, str] = {}
    for profile, _ in analysis.declarations(ast.Profile):
        for item in profile.items:
            if isinstance(item, ast.Kind):
                seen.setdefault(item.name.value, f"kind of profile {profile.name.value}")
    return [Item(name, "kind", detail) for name, detail in seen.items()]


def _ops(analysis: Analysis) -> list[Item]:
    return [Item(op.name.value, "op", str(op.meaning.value))
            for vocabulary, _ in analysis.declarations(ast.Vocabulary) for op in vocabulary.ops]
