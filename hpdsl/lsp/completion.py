"""Completion: what may be written at the cursor, from the block the cursor is in.

The block is read from the text before the cursor (the words before each open
`{`), not from the AST, because a file being typed rarely parses. Inside a model
the model fields and blocks are offered; inside `moe { }`, `linear { }` or
`mla { }` that block's fields (hpdsl/model/fields.py); in a kind's `ops { }` the
vocabulary's op names; in `slots { }` slot and family names; after `:` in a model
header the profiles; after `from` or `default`, in a stack or layer_types, kinds.
In a family's `when` or `require` condition: the axes, `not` and that family's
own selectors (after `selector ==` or `in (`, an enum selector's values); after a
model field with a fixed set of values (`norm `, `mlp `, a bool), those values.
"""

from __future__ import annotations

import re

import attrs

from hpdsl import ast
from hpdsl.lsp.analysis import Analysis
from hpdsl.model.axes import CONDITION_AXES
from hpdsl.model.fields import BLOCKS, FIELDS, block_fields
from hpdsl.model.slots import SLOTS

TOP_LEVEL = ("import", "vocabulary", "slots", "profile", "family", "model", "device", "cluster")
PROFILE_ITEMS = ("kind", "default", "run", "model", "facts", "model_types", "slots")
KIND_ITEMS = ("ops", "attention", "ffn", "slots")
FAMILY_ITEMS = ("factory", "parallel", "selector", "require", "variant", "layout", "cost")
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
    if blocks and blocks[0] == "family":
        condition = _in_condition(text, before, current)
        if condition is not None:
            return condition
    if blocks and blocks[0] == "model":
        values = _field_values(current)
        if values is not None:
            return values
    if re.search(r"\bmodel\s+\w+\s*:\s*\w*$", current):
        return _names(analysis, ast.Profile, "profile")
    if re.search(r"\b(from|default)\s+\w*$", current) or _in_stack(before):
        return _kinds(analysis)
    if not blocks:
        return [Item(word, "keyword") for word in TOP_LEVEL]
    return _in_block(analysis, blocks)


def _field_values(current: str) -> list[Item] | None:
    """Return the values of the model field just written (`norm ` -> rmsnorm, layernorm), if it has a fixed set."""
    found = re.search(r"(?:^|[{\s])([a-z_]+)\s+\w*$", current)
    field = FIELDS.get(found.group(1)) if found else None
    if field is None:
        return None
    if field.choices:
        return [Item(choice, "value", f"{field.name}: {field.meaning}") for choice in field.choices]
    if field.type == "bool":
        return [Item(word, "value", f"{field.name}: {field.meaning}") for word in ("true", "false")]
    return None


_SELECTOR = re.compile(r"\bselector\s+([A-Za-z_]\w*)\s*:\s*(enum\s*\(([^)]*)\)|\w+)")


def _in_condition(text: str, before: str, current: str) -> list[Item] | None:
    """Return what a `when` or `require` condition may name here (None outside one)."""
    if not re.search(r"\b(when|require)\b[^\"]*$", _strip(current)):
        return None
    selectors = _family_selectors(text, before)
    compared = re.search(r"\b([A-Za-z_]\w*)\s*(?:==|!=|in\s*\()[^()]*$", current)
    if compared and compared.group(1) in selectors:
        return [Item(value, "value", f"a value of {compared.group(1)}") for value in selectors[compared.group(1)]]
    return ([Item(axis, "keyword", "a mesh axis size") for axis in CONDITION_AXES]
            + [Item("not", "keyword"), Item("parallel", "keyword", "whether the family is sharded")]
            + [Item(name, "selector") for name in selectors])


def _family_selectors(text: str, before: str) -> dict[str, list[str]]:
    """Return the selectors of the family the cursor is in (read from the text: it may not parse), with enum values."""
    starts = list(re.finditer(r"\bfamily\s+[A-Za-z_]\w*\s*\{", _strip(before)))
    if not starts:
        return {}
    body = _strip(text)[starts[-1].end():]
    depth, end = 1, len(body)
    for index, char in enumerate(body):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            end = index
            break
    out: dict[str, list[str]] = {}
    for match in _SELECTOR.finditer(body[:end]):
        values = match.group(3)
        out[match.group(1)] = [v.strip() for v in values.split(",") if v.strip()] if values else []
    return out


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
        return [Item(w, "keyword") for w in FAMILY_ITEMS]
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
