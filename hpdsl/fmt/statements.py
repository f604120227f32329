"""The statements `hpdsl fmt` prints on one line, and the words it fills into lines (hpdsl/fmt/__init__.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hpdsl import ast
from hpdsl.fmt.inline import (format_dim, format_expr, format_literal, format_operand, format_placement,
                              format_selector_type, format_stack_list, format_weight)

# Statements printed on one line, by node type.
STATEMENTS: dict[type, Callable[[Any], str]] = {
    ast.ImportDecl: lambda n: f"import {format_literal(n.path)}",
    ast.DefaultKind: lambda n: f"default {n.kind.value}",
    ast.ModelTypes: lambda n: "model_types " + " ".join(format_literal(t) for t in n.types),
    ast.AttentionFlavour: lambda n: f"attention {n.value.value}",
    ast.FfnFlavour: lambda n: f"ffn {n.value.value}",
    ast.KindWiring: lambda n: f"wiring {n.value.value}",
    ast.Factory: lambda n: f"factory {format_literal(n.path)}",
    ast.ParallelAxis: lambda n: f"parallel {n.axis.value}",
    ast.Selector: lambda n: selector_text(n),
    ast.Require: lambda n: require_text(n),
    ast.Field: lambda n: field_text(n),
    ast.Choice: lambda n: f"{n.key.value} {n.value.value}",
    ast.Stack: lambda n: f"stack {format_stack_list(n.body)}",
    ast.HfDefault: lambda n: f"default {n.key.value} " + ("unset" if n.value is None
                                                          else f"= {format_literal(n.value)}"),
    ast.HfDerive: lambda n: f"derive {n.field.value} = {format_dim(n.value)}",
    ast.HfMap: lambda n: f"map {n.key.value} -> " + (f"{n.block.value}." if n.block else "") + n.field.value
    + (" { " + "  ".join(f"{format_literal(v.stated)} -> {value_text(v.value)}" for v in n.values) + " }"
       if n.values else ""),
    ast.Setting: lambda n: f"{n.key.value} = {format_literal(n.value)}",
    ast.HfWeight: lambda n: format_weight(n),
}


def value_text(value: ast.Literal | ast.Name) -> str:
    return value.value if isinstance(value, ast.Name) else format_literal(value)


def ignored_text(node: ast.HfIgnored) -> str:
    key = node.key.value if isinstance(node.key, ast.Name) else format_literal(node.key)
    return key if node.value is None else f"{key} = {format_literal(node.value)}"


def fill_words(words: Sequence[str], width: int, sep: str) -> list[str]:
    """Fill words, `sep` between them, into lines of at most `width` columns (one word may be longer)."""
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + len(sep) + len(word) <= width:
            lines[-1] += sep + word
        else:
            lines.append(word)
    return lines


def fill_items(words: Sequence[str], width: int) -> list[str]:
    """Fill `word,` items into lines of at most `width` columns (one word may be longer)."""
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) + 1 <= width:
            lines[-1] += f" {word},"
        else:
            lines.append(f"{word},")
    return lines


def selector_text(node: ast.Selector) -> str:
    text = f"selector {node.name.value}: {format_selector_type(node.type)}"
    return text if node.default is None else f"{text} = {format_operand(node.default)}"


def require_text(node: ast.Require) -> str:
    text = f"require {format_expr(node.condition)}"
    return text if node.message is None else f"{text} {format_literal(node.message)}"


def variant_text(node: ast.Variant) -> str:
    parts = [f"variant {node.name.value} {format_literal(node.path)}"]
    if node.is_default:
        parts.append("default")
    if node.when is not None:
        parts.append(f"when {format_expr(node.when)}")
    if node.accepts:
        parts.append(f"accepts({', '.join(n.value for n in node.accepts)})")
    if node.params:
        parts.append(f"params({', '.join(p.text for p in node.params)})")
    return " ".join(parts)


def layout_rest(entry: ast.LayoutEntry) -> str:
    """Return what follows an entry's dims: the placement, `by UNIT`, `for VARIANTS`, `if CONDITION`."""
    parts = [format_placement(entry.placement)]
    if entry.unit is not None:
        parts.append(f"by {format_dim(entry.unit)}")
    if entry.variants:
        parts.append(f"for {', '.join(v.value for v in entry.variants)}")
    if entry.condition is not None:
        parts.append(f"if {format_expr(entry.condition)}")
    return " ".join(parts)


def cost_rest(term: ast.CostTerm) -> str:
    """Return what follows a cost term's `=`: its expression, `replicate`/`sequence`/`routed`, `at BYTES`, `recompute MODE`,
    `with|without flash`, `if CONDITION`."""
    parts = [format_dim(term.expr)]
    if term.replicate:
        parts.append("replicate")
    elif term.sequence:
        parts.append("sequence")
    elif term.routed:
        parts.append("routed")
    if term.bytes is not None:
        parts.append(f"at {term.bytes.value}")
    if term.recompute is not None:
        parts.append(f"recompute {term.recompute.value}")
    if term.flash is not None:
        parts.append(f"{term.flash.value} flash")
    if term.condition is not None:
        parts.append(f"if {format_expr(term.condition)}")
    return " ".join(parts)


def field_text(node: ast.Field) -> str:
    if node.value is None:
        return node.name.value
    return f"{node.name.value} {format_literal(node.value)}"


__all__ = ["STATEMENTS", "cost_rest", "field_text", "fill_items", "fill_words", "ignored_text", "layout_rest",
           "require_text", "selector_text", "value_text", "variant_text"]
