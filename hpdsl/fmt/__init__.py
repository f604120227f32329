"""An AST into canonical .hpf text (`hpdsl fmt`), every comment kept.

This module lays statements and blocks out and places the comments; the inline
forms (literals, conditions, stack lists, layout dims) are in hpdsl/fmt/inline.py.

The canonical form: 2-space indentation, one statement per line, one blank line
between top-level declarations (consecutive imports, and field declarations, stay together); ops, run,
model and facts blocks, slots blocks and model sub-blocks on one line
(`ops { attMM 4  attBMM 2 }`) unless they hold a comment or pass 120 columns,
then one entry per line; vocabulary meanings, the families of a slots block laid
one binding per line and the trailing comments of
consecutive lines aligned in a column; layout entries one per line, paths and
(while they fit) dims aligned in columns; a variant past 120 columns continues
with its params(...) on the next line, indented twice, and a field declaration with its
meaning; conditions and dims
expressions with the fewest parentheses that parse back to the same AST. Blank lines inside blocks are kept where the
source had them (at most one), never just inside a brace.

Comments are placed by source position. The formatter first lays the AST out as
*units* (a statement, a block's opening line, a closing brace), each knowing the
source range it prints; then each comment goes before the first unit that ends
after it (own-line comments, and comments inside a statement printed on one
line), or at the end of the unit that ends just before it on the same line
(trailing comments). Both rules depend only on positions, so the output keeps
the comments in source order and formatting twice changes nothing.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any, Literal

import attrs

from hpdsl import ast
from hpdsl.diagnostics.span import Source, Span
from hpdsl.fmt.inline import (format_dim, format_dims, format_expr, format_field_decl, format_literal,
                              format_operand, format_placement, format_selector_type, format_stack_list,
                              format_weight)
from hpdsl.syntax import parse_source
from hpdsl.syntax.text import BOM

INDENT = "  "
WIDTH = 120

Pos = tuple[int, int]
Role = Literal["open", "stmt", "close"]
_Line = tuple[str, str | None]  # code, and the trailing comment it ends with



def format_source(source: Source) -> str:
    """Parse a source and return its canonical text; raise SpecError on bad syntax.

    A leading byte-order mark, which the parsers skip, is kept: `fmt --write` leaves it in the file.
    """
    text = format_file(parse_source(source))
    return BOM + text if source.text.startswith(BOM) else text


def format_file(file: ast.File) -> str:
    """Return the canonical text of a parsed file, its comments in place."""
    comments = sorted(file.comments, key=lambda c: _start(c.span))
    layout = _Layout([_start(c.span) for c in comments])
    units = [unit for item in file.items for unit in layout.declaration(item)]
    return _Printer(units, comments).text()


# --------------------------------------------------------------------------
# Layout: the AST as units
# --------------------------------------------------------------------------


@attrs.frozen
class _Unit:
    """Output lines printed from one source range [start, end)."""

    depth: int
    lines: tuple[str, ...]
    start: Pos
    end: Pos
    role: Role = "stmt"
    group: str = ""  # consecutive top-level units of one group (imports, fields) keep no blank line between


def _start(span: Span) -> Pos:
    return (span.line, span.col)


def _end(span: Span) -> Pos:
    return (span.end_line, span.end_col)


def _after(span: Span, width: int) -> Pos:
    """The position just after a keyword of `width` characters opening `span`."""
    return (span.line, span.col + width)


# Statements printed on one line, by node type.
_STATEMENTS: dict[type, Callable[[Any], str]] = {
    ast.ImportDecl: lambda n: f"import {format_literal(n.path)}",
    ast.DefaultKind: lambda n: f"default {n.kind.value}",
    ast.ModelTypes: lambda n: "model_types " + " ".join(format_literal(t) for t in n.types),
    ast.AttentionFlavour: lambda n: f"attention {n.value.value}",
    ast.FfnFlavour: lambda n: f"ffn {n.value.value}",
    ast.KindWiring: lambda n: f"wiring {n.value.value}",
    ast.Factory: lambda n: f"factory {format_literal(n.path)}",
    ast.ParallelAxis: lambda n: f"parallel {n.axis.value}",
    ast.Selector: lambda n: _selector(n),
    ast.Require: lambda n: _require(n),
    ast.Field: lambda n: _field(n),
    ast.Choice: lambda n: f"{n.key.value} {n.value.value}",
    ast.Stack: lambda n: f"stack {format_stack_list(n.body)}",
    ast.HfDefault: lambda n: f"default {n.key.value} " + ("unset" if n.value is None
                                                          else f"= {format_literal(n.value)}"),
    ast.HfDerive: lambda n: f"derive {n.field.value} = {format_dim(n.value)}",
    ast.HfMap: lambda n: f"map {n.key.value} -> " + (f"{n.block.value}." if n.block else "") + n.field.value
    + (" { " + "  ".join(f"{format_literal(v.stated)} -> {_target(v.value)}" for v in n.values) + " }"
       if n.values else ""),
    ast.Setting: lambda n: f"{n.key.value} = {format_literal(n.value)}",
    ast.HfWeight: lambda n: format_weight(n),
}


def _target(value: ast.Literal | ast.Name) -> str:
    return value.value if isinstance(value, ast.Name) else format_literal(value)


class _Layout:
    """Turns declarations into units; blocks holding a comment open up one entry per line."""

    def __init__(self, comments: Sequence[Pos]) -> None:
        self._comments = list(comments)
        self._blocks: dict[type, Callable[[Any, int], list[_Unit]]] = {
            ast.Vocabulary: self._vocabulary, ast.Profile: self._named, ast.Family: self._named,
            ast.Kind: self._kind, ast.SettingsBlock: self._settings, ast.OpsBlock: self._ops,
            ast.Model: self._model, ast.Block: self._model_block,
            ast.LayerTypes: self._layer_types, ast.Layout: self._layout, ast.CostBlock: self._cost,
            ast.Variant: self._variant,
            ast.SlotsBlock: self._slots, ast.ImportRules: self._import_rules, ast.HfRead: self._read,
            ast.HfIgnore: self._ignore, ast.HfPattern: self._pattern, ast.Device: self._machine,
            ast.Cluster: self._machine, ast.Curve: self._curve, ast.Tier: self._tier,
            ast.FieldDecl: self._field_decl, ast.KindDims: self._kind_dims,
        }

    def declaration(self, node: ast.Declaration) -> list[_Unit]:
        """Return the units of one top-level declaration."""
        return self._item(node, 0)

    def _item(self, node: Any, depth: int) -> list[_Unit]:
        render = _STATEMENTS.get(type(node))
        if render is None:
            return self._blocks[type(node)](node, depth)
        return [_Unit(depth, (render(node),), _start(node.span), _end(node.span),
                      group="import" if isinstance(node, ast.ImportDecl) else "")]

    def _has_comment(self, after: Pos, span: Span) -> bool:
        """Whether a comment lies in the body of a block: past its header, before its end.

        (Comments inside the header are moved above the block, so they do not count.)
        """
        index = bisect.bisect_left(self._comments, after)
        return index < len(self._comments) and self._comments[index] < _end(span)

    def _stmt(self, text: str, span: Span, depth: int) -> list[_Unit]:
        return [_Unit(depth, (text,), _start(span), _end(span))]

    def _block(self, header: str, node: Any, header_end: Pos, items: Sequence[Any],
               depth: int) -> list[_Unit]:
        inner = [unit for item in items for unit in self._item(item, depth + 1)]
        return self._wrap(header, node.span, header_end, inner, depth)

    def _wrap(self, header: str, span: Span, header_end: Pos, inner: list[_Unit],
              depth: int) -> list[_Unit]:
        if not inner and not self._has_comment(header_end, span):
            return self._stmt(header + " {}", span, depth)
        opening = _Unit(depth, (header + " {",), _start(span), header_end, "open")
        closing = _Unit(depth, ("}",), (span.end_line, span.end_col - 1), _end(span), "close")
        return [opening, *inner, closing]

    def _inline(self, header: str, span: Span, header_end: Pos,
                entries: Sequence[tuple[str, Span]], depth: int) -> list[_Unit]:
        """Lay out a block of short entries on one line when it fits and holds no comment."""
        line = f"{header} {{ {'  '.join(text for text, _ in entries)} }}"
        fits = len(INDENT * depth + line) <= WIDTH
        if entries and fits and not self._has_comment(header_end, span):
            return self._stmt(line, span, depth)
        inner = [u for text, entry in entries for u in self._stmt(text, entry, depth + 1)]
        return self._wrap(header, span, header_end, inner, depth)

    def _vocabulary(self, node: ast.Vocabulary, depth: int) -> list[_Unit]:
        # Meanings line up in a column, like a table.
        width = max((len(op.name.value) for op in node.ops), default=0)
        inner = [u for op in node.ops for u in self._stmt(
            f"{op.name.value.ljust(width)} {format_literal(op.meaning)}", op.span, depth + 1)]
        return self._wrap("vocabulary", node.span, _after(node.span, 10), inner, depth)

    def _slots(self, node: ast.SlotsBlock, depth: int) -> list[_Unit]:
        # On one line when it fits; else one binding per line, the families in a column.
        header_end = _after(node.span, 5)
        pairs = [(b.slot.value, b.family.value) for b in node.bindings]
        line = f"slots {{ {'  '.join(f'{slot} {family}' for slot, family in pairs)} }}"
        if (pairs and len(INDENT * depth + line) <= WIDTH
                and not self._has_comment(header_end, node.span)):
            return self._stmt(line, node.span, depth)
        width = max((len(slot) for slot, _ in pairs), default=0)
        inner = [u for (slot, family), binding in zip(pairs, node.bindings, strict=True)
                 for u in self._stmt(f"{slot.ljust(width)} {family}", binding.span, depth + 1)]
        return self._wrap("slots", node.span, header_end, inner, depth)

    def _variant(self, node: ast.Variant, depth: int) -> list[_Unit]:
        # A variant too long for one line continues with its params(...), indented twice.
        line = _variant(node)
        params = f"params({', '.join(p.text for p in node.params)})"
        lines: tuple[str, ...]
        if node.params and len(INDENT * depth + line) > WIDTH:
            lines = (line.removesuffix(" " + params), INDENT * 2 + params)
        else:
            lines = (line,)
        return [_Unit(depth, lines, _start(node.span), _end(node.span))]

    def _layout(self, node: ast.Layout, depth: int) -> list[_Unit]:
        # Paths, dims and placements line up in columns, like a table; the dims column
        # only while every row still fits the width.
        rows = [(e.path.text, format_dims(e.dims), _layout_rest(e)) for e in node.entries]
        path_width = max((len(path) for path, _, _ in rows), default=0)
        dims_width = max((len(dims) for _, dims, _ in rows), default=0)
        longest = max((len(rest) for _, _, rest in rows), default=0)
        if len(INDENT * (depth + 1)) + path_width + dims_width + longest + 2 > WIDTH:
            dims_width = 0
        inner = [u for (path, dims, rest), entry in zip(rows, node.entries, strict=True)
                 for u in self._stmt(f"{path.ljust(path_width)} {dims.ljust(dims_width)} {rest}",
                                     entry.span, depth + 1)]
        return self._wrap("layout", node.span, _after(node.span, 6), inner, depth)

    def _cost(self, node: ast.CostBlock, depth: int) -> list[_Unit]:
        # One term per line, the `=` signs lined up.
        heads = [f"{t.unit.value} {t.name.value}" for t in node.terms]
        width = max((len(head) for head in heads), default=0)
        inner = [u for head, term in zip(heads, node.terms, strict=True)
                 for u in self._stmt(f"{head.ljust(width)} = {_cost_rest(term)}", term.span, depth + 1)]
        return self._wrap("cost", node.span, _after(node.span, 4), inner, depth)

    def _field_decl(self, node: ast.FieldDecl, depth: int) -> list[_Unit]:
        # A declaration past 120 columns continues with its meaning, indented twice.
        head, meaning = format_field_decl(node)
        fits = len(INDENT * depth + head + meaning) < WIDTH
        lines = (f"{head} {meaning}",) if fits else (head, INDENT * 2 + meaning)
        return [_Unit(depth, lines, _start(node.span), _end(node.span), group="field")]

    def _named(self, node: ast.Profile | ast.Family, depth: int) -> list[_Unit]:
        keyword = "profile" if isinstance(node, ast.Profile) else "family"
        return self._block(f"{keyword} {node.name.value}", node, _end(node.name.span),
                           node.items, depth)

    def _machine(self, node: ast.Device | ast.Cluster, depth: int) -> list[_Unit]:
        keyword = "device" if isinstance(node, ast.Device) else "cluster"
        return self._block(f"{keyword} {node.name.value}", node, _end(node.name.span), node.items, depth)

    def _curve(self, node: ast.Curve, depth: int) -> list[_Unit]:
        entries = [(f"{format_literal(p.size)} {format_literal(p.efficiency)}", p.span) for p in node.points]
        return self._inline(f"curve {node.name.value}", node.span, _end(node.name.span), entries, depth)

    def _tier(self, node: ast.Tier, depth: int) -> list[_Unit]:
        entries = [(f"{s.key.value} = {format_literal(s.value)}", s.span) for s in node.settings]
        return self._inline(f"tier {node.name.value}", node.span, _end(node.name.span), entries, depth)

    def _kind(self, node: ast.Kind, depth: int) -> list[_Unit]:
        header = f"kind {node.name.value}"
        if node.base is not None:
            header += f" from {node.base.value}"
        header_end = _end((node.base or node.name).span)
        return self._block(header, node, header_end, node.items, depth)

    def _kind_dims(self, node: ast.KindDims, depth: int) -> list[_Unit]:
        # On one line while it fits, like a tier's settings; else one entry per line.
        entries = [(f"{e.field.value} = {format_dim(e.value)}", e.span) for e in node.entries]
        return self._inline("dims", node.span, _after(node.span, 4), entries, depth)

    def _settings(self, node: ast.SettingsBlock, depth: int) -> list[_Unit]:
        header = " ".join([node.block, *(format_literal(t) for t in node.types)])
        header_end = _end(node.types[-1].span) if node.types else _after(node.span, len(node.block))
        entries = [(f"{s.key.value} = {format_literal(s.value)}", s.span) for s in node.settings]
        return self._inline(header, node.span, header_end, entries, depth)

    def _ops(self, node: ast.OpsBlock, depth: int) -> list[_Unit]:
        entries = [(f"{c.op.value} {format_literal(c.count)}", c.span) for c in node.counts]
        return self._inline("ops", node.span, _after(node.span, 3), entries, depth)

    def _model(self, node: ast.Model, depth: int) -> list[_Unit]:
        header = f"model {node.name.value}"
        if node.profile is not None:
            header += f" : {node.profile.value}"
        header_end = _end((node.profile or node.name).span)
        return self._block(header, node, header_end, node.items, depth)

    def _model_block(self, node: ast.Block, depth: int) -> list[_Unit]:
        entries = [(_field(f), f.span) for f in node.fields]
        return self._inline(node.name.value, node.span, _end(node.name.span), entries, depth)

    def _import_rules(self, node: ast.ImportRules, depth: int) -> list[_Unit]:
        header = " ".join(["hf", *(format_literal(t) for t in node.types)])
        header_end = _end(node.types[-1].span) if node.types else _after(node.span, 2)
        return self._block(header, node, header_end, node.rules, depth)

    def _read(self, node: ast.HfRead, depth: int) -> list[_Unit]:
        # Past 120 columns the keys fill further lines, indented twice.
        words = [k.value for k in node.keys]
        line = "read " + " ".join(words)
        if len(INDENT * depth + line) <= WIDTH:
            return self._stmt(line, node.span, depth)
        lines = _fill_words(words, WIDTH - len(INDENT) * (depth + 2), " ")
        shown = ("read " + lines[0], *(INDENT * 2 + rest for rest in lines[1:]))
        return [_Unit(depth, shown, _start(node.span), _end(node.span))]

    def _ignore(self, node: ast.HfIgnore, depth: int) -> list[_Unit]:
        entries = [(_ignored(k), k.span) for k in node.keys]
        header = f"{'unmodelled' if node.unmodelled else 'ignore'} {format_literal(node.reason)}"
        return self._filled(header, node.span, _end(node.reason.span), entries, depth)

    def _pattern(self, node: ast.HfPattern, depth: int) -> list[_Unit]:
        entries = [(f"{format_literal(s.symbol)} -> {s.kind.value}", s.span) for s in node.symbols]
        return self._inline(f"pattern {node.key.value}", node.span, _end(node.key.span), entries, depth)

    def _filled(self, header: str, span: Span, header_end: Pos, entries: Sequence[tuple[str, Span]],
                depth: int) -> list[_Unit]:
        """Like _inline, but a block too long for one line fills its entries into lines (no comment inside)."""
        line = f"{header} {{ {'  '.join(text for text, _ in entries)} }}"
        if not entries or len(INDENT * depth + line) <= WIDTH or self._has_comment(header_end, span):
            return self._inline(header, span, header_end, entries, depth)
        lines = _fill_words([text for text, _ in entries], WIDTH - len(INDENT) * (depth + 1), "  ")
        body = _Unit(depth + 1, tuple(lines), _start(entries[0][1]), _end(entries[-1][1]))
        return self._wrap(header, span, header_end, [body], depth)

    def _layer_types(self, node: ast.LayerTypes, depth: int) -> list[_Unit]:
        names = [n.value for n in node.names]
        line = f"layer_types [{', '.join(names)}]"
        if len(INDENT * depth + line) <= WIDTH:
            return self._stmt(line, node.span, depth)
        lines = ["layer_types [", *_fill(names, WIDTH - len(INDENT) * (depth + 1)), "]"]
        indented = [lines[0], *(INDENT + line for line in lines[1:-1]), lines[-1]]
        return [_Unit(depth, tuple(indented), _start(node.span), _end(node.span))]


def _ignored(node: ast.HfIgnored) -> str:
    key = node.key.value if isinstance(node.key, ast.Name) else format_literal(node.key)
    return key if node.value is None else f"{key} = {format_literal(node.value)}"


def _fill_words(words: Sequence[str], width: int, sep: str) -> list[str]:
    """Fill words, `sep` between them, into lines of at most `width` columns (one word may be longer)."""
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + len(sep) + len(word) <= width:
            lines[-1] += sep + word
        else:
            lines.append(word)
    return lines


def _fill(words: Sequence[str], width: int) -> list[str]:
    """Fill `word,` items into lines of at most `width` columns (one word may be longer)."""
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) + 1 <= width:
            lines[-1] += f" {word},"
        else:
            lines.append(f"{word},")
    return lines


def _selector(node: ast.Selector) -> str:
    text = f"selector {node.name.value}: {format_selector_type(node.type)}"
    return text if node.default is None else f"{text} = {format_operand(node.default)}"


def _require(node: ast.Require) -> str:
    text = f"require {format_expr(node.condition)}"
    return text if node.message is None else f"{text} {format_literal(node.message)}"


def _variant(node: ast.Variant) -> str:
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


def _layout_rest(entry: ast.LayoutEntry) -> str:
    """Return what follows an entry's dims: the placement, `by UNIT`, `for VARIANTS`, `if CONDITION`."""
    parts = [format_placement(entry.placement)]
    if entry.unit is not None:
        parts.append(f"by {format_dim(entry.unit)}")
    if entry.variants:
        parts.append(f"for {', '.join(v.value for v in entry.variants)}")
    if entry.condition is not None:
        parts.append(f"if {format_expr(entry.condition)}")
    return " ".join(parts)


def _cost_rest(term: ast.CostTerm) -> str:
    """Return what follows a cost term's `=`: its expression, `replicate`, `recompute MODE`, `if CONDITION`."""
    parts = [format_dim(term.expr)]
    if term.replicate:
        parts.append("replicate")
    if term.recompute is not None:
        parts.append(f"recompute {term.recompute.value}")
    if term.condition is not None:
        parts.append(f"if {format_expr(term.condition)}")
    return " ".join(parts)


def _field(node: ast.Field) -> str:
    if node.value is None:
        return node.name.value
    return f"{node.name.value} {format_literal(node.value)}"


# --------------------------------------------------------------------------
# Printing: units and comments into lines
# --------------------------------------------------------------------------


class _Printer:
    """Merges the units and the comments into the output lines."""

    def __init__(self, units: list[_Unit], comments: Sequence[ast.Comment]) -> None:
        self.units = units
        self.leading: list[list[ast.Comment]] = [[] for _ in range(len(units) + 1)]
        self.trailing: dict[int, ast.Comment] = {}
        self.occupied = {line for u in units for line in range(u.start[0], u.end[0] + 1)}
        self.occupied |= {c.span.line for c in comments}
        ends = [u.end for u in units]
        for comment in comments:
            self._place(comment, ends)

    def _place(self, comment: ast.Comment, ends: list[Pos]) -> None:
        pos = _start(comment.span)
        index = bisect.bisect_right(ends, pos)  # the first unit ending after the comment
        inside = index < len(self.units) and self.units[index].start < pos
        if (index > 0 and not inside and ends[index - 1][0] == pos[0]
                and index - 1 not in self.trailing):
            self.trailing[index - 1] = comment
        else:
            self.leading[index].append(comment)

    def text(self) -> str:
        """Return the formatted text, ending in one newline (empty for an empty file)."""
        out: list[_Line] = []
        prev: tuple[int, _Unit | None] | None = None  # (last source line, unit or None)
        for index in range(len(self.units) + 1):
            unit = self.units[index] if index < len(self.units) else None
            for number, comment in enumerate(self.leading[index]):
                self._blank(out, prev, comment.span.line, unit, first=number == 0, is_unit=False)
                depth = 0 if unit is None else unit.depth + (unit.role == "close")
                out.append((INDENT * depth + comment.text, None))
                prev = (comment.span.line, None)
            if unit is not None:
                self._blank(out, prev, unit.start[0], unit, first=not self.leading[index],
                            is_unit=True)
                out.extend(self._unit_lines(index, unit))
                prev = (unit.end[0], unit)
        return "".join(line.rstrip() + "\n" for line in _align(out))

    def _unit_lines(self, index: int, unit: _Unit) -> list[_Line]:
        lines: list[_Line] = [(INDENT * unit.depth + line, None) for line in unit.lines]
        if index in self.trailing:
            lines[-1] = (lines[-1][0], self.trailing[index].text)
        return lines

    def _blank(self, out: list[_Line], prev: tuple[int, _Unit | None] | None, line: int,
               unit: _Unit | None, *, first: bool, is_unit: bool) -> None:
        """Add a blank line before an element where the canonical form or the source has one."""
        if prev is None:
            return
        prev_line, prev_unit = prev
        if first and _starts_declaration(unit) and not _imports(prev_unit, unit):
            out.append(("", None))
        elif (prev_unit is not None and prev_unit.role == "open") or (
                is_unit and unit is not None and unit.role == "close"):
            return  # never a blank line just inside a brace
        elif any(n not in self.occupied for n in range(prev_line + 1, line)):
            out.append(("", None))


def _starts_declaration(unit: _Unit | None) -> bool:
    """Whether a unit opens a top-level declaration (None: the comments closing the file)."""
    return unit is None or (unit.depth == 0 and unit.role != "close")


def _imports(prev: _Unit | None, unit: _Unit | None) -> bool:
    """Whether two units are consecutive imports (or field declarations), which stay together."""
    return prev is not None and unit is not None and prev.group != "" and prev.group == unit.group


def _align(lines: list[_Line]) -> list[str]:
    """Line up the trailing comments of consecutive lines in one column, two spaces out."""
    out: list[str] = []
    run: list[tuple[str, str]] = []
    for code, comment in [*lines, ("", None)]:
        if comment is not None:
            run.append((code, comment))
            continue
        width = max((len(c) for c, _ in run), default=0)
        out += [f"{c.ljust(width)}  {text}" for c, text in run]
        run = []
        out.append(code)
    return out[:-1]


__all__ = ["format_dim", "format_dims", "format_expr", "format_file", "format_literal",
           "format_placement", "format_source", "format_stack_list"]
