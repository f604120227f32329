"""An AST into canonical .hpf text (`hpdsl fmt`), every comment kept.

This module lays statements and blocks out as units (hpdsl/fmt/units.py); the statements
printed on one line are hpdsl/fmt/statements.py, the inline forms (literals, conditions, stack
lists, layout dims) hpdsl/fmt/inline.py, and hpdsl/fmt/printer.py places the comments.

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
from typing import Any

from hpdsl import ast
from hpdsl.diagnostics.span import Source, Span
from hpdsl.fmt.inline import (format_dim, format_dims, format_expr, format_field_decl, format_literal,
                              format_placement, format_stack_list)
from hpdsl.fmt.printer import Printer
from hpdsl.fmt.statements import (STATEMENTS, cost_rest, field_text, fill_items, fill_words, ignored_text,
                                  layout_rest, variant_text)
from hpdsl.fmt.units import INDENT, WIDTH, Pos, Unit, after_pos, end_pos, start_pos
from hpdsl.syntax import parse_source
from hpdsl.syntax.text import BOM


def format_source(source: Source) -> str:
    """Parse a source and return its canonical text; raise SpecError on bad syntax.

    A leading byte-order mark, which the parsers skip, is kept: `fmt --write` leaves it in the file.
    """
    text = format_file(parse_source(source))
    return BOM + text if source.text.startswith(BOM) else text


def format_file(file: ast.File) -> str:
    """Return the canonical text of a parsed file, its comments in place."""
    comments = sorted(file.comments, key=lambda c: start_pos(c.span))
    layout = _Layout([start_pos(c.span) for c in comments])
    units = [unit for item in file.items for unit in layout.declaration(item)]
    return Printer(units, comments).text()


# --------------------------------------------------------------------------


class _Layout:
    """Turns declarations into units; blocks holding a comment open up one entry per line."""

    def __init__(self, comments: Sequence[Pos]) -> None:
        self._comments = list(comments)
        self._blocks: dict[type, Callable[[Any, int], list[Unit]]] = {
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

    def declaration(self, node: ast.Declaration) -> list[Unit]:
        """Return the units of one top-level declaration."""
        return self._item(node, 0)

    def _item(self, node: Any, depth: int) -> list[Unit]:
        render = STATEMENTS.get(type(node))
        if render is None:
            return self._blocks[type(node)](node, depth)
        return [Unit(depth, (render(node),), start_pos(node.span), end_pos(node.span),
                      group="import" if isinstance(node, ast.ImportDecl) else "")]

    def _has_comment(self, after: Pos, span: Span) -> bool:
        """Whether a comment lies in the body of a block: past its header, before its end.

        (Comments inside the header are moved above the block, so they do not count.)
        """
        index = bisect.bisect_left(self._comments, after)
        return index < len(self._comments) and self._comments[index] < end_pos(span)

    def _stmt(self, text: str, span: Span, depth: int) -> list[Unit]:
        return [Unit(depth, (text,), start_pos(span), end_pos(span))]

    def _block(self, header: str, node: Any, header_end: Pos, items: Sequence[Any],
               depth: int) -> list[Unit]:
        inner = [unit for item in items for unit in self._item(item, depth + 1)]
        return self._wrap(header, node.span, header_end, inner, depth)

    def _wrap(self, header: str, span: Span, header_end: Pos, inner: list[Unit],
              depth: int) -> list[Unit]:
        if not inner and not self._has_comment(header_end, span):
            return self._stmt(header + " {}", span, depth)
        opening = Unit(depth, (header + " {",), start_pos(span), header_end, "open")
        closing = Unit(depth, ("}",), (span.end_line, span.end_col - 1), end_pos(span), "close")
        return [opening, *inner, closing]

    def _inline(self, header: str, span: Span, header_end: Pos,
                entries: Sequence[tuple[str, Span]], depth: int) -> list[Unit]:
        """Lay out a block of short entries on one line when it fits and holds no comment."""
        line = f"{header} {{ {'  '.join(text for text, _ in entries)} }}"
        fits = len(INDENT * depth + line) <= WIDTH
        if entries and fits and not self._has_comment(header_end, span):
            return self._stmt(line, span, depth)
        inner = [u for text, entry in entries for u in self._stmt(text, entry, depth + 1)]
        return self._wrap(header, span, header_end, inner, depth)

    def _vocabulary(self, node: ast.Vocabulary, depth: int) -> list[Unit]:
        # Meanings line up in a column, like a table.
        width = max((len(op.name.value) for op in node.ops), default=0)
        inner = [u for op in node.ops for u in self._stmt(
            f"{op.name.value.ljust(width)} {format_literal(op.meaning)}", op.span, depth + 1)]
        return self._wrap("vocabulary", node.span, after_pos(node.span, 10), inner, depth)

    def _slots(self, node: ast.SlotsBlock, depth: int) -> list[Unit]:
        # On one line when it fits; else one binding per line, the families in a column.
        header_end = after_pos(node.span, 5)
        pairs = [(b.slot.value, b.family.value) for b in node.bindings]
        line = f"slots {{ {'  '.join(f'{slot} {family}' for slot, family in pairs)} }}"
        if (pairs and len(INDENT * depth + line) <= WIDTH
                and not self._has_comment(header_end, node.span)):
            return self._stmt(line, node.span, depth)
        width = max((len(slot) for slot, _ in pairs), default=0)
        inner = [u for (slot, family), binding in zip(pairs, node.bindings, strict=True)
                 for u in self._stmt(f"{slot.ljust(width)} {family}", binding.span, depth + 1)]
        return self._wrap("slots", node.span, header_end, inner, depth)

    def _variant(self, node: ast.Variant, depth: int) -> list[Unit]:
        # A variant too long for one line continues with its params(...), indented twice.
        line = variant_text(node)
        params = f"params({', '.join(p.text for p in node.params)})"
        lines: tuple[str, ...]
        if node.params and len(INDENT * depth + line) > WIDTH:
            lines = (line.removesuffix(" " + params), INDENT * 2 + params)
        else:
            lines = (line,)
        return [Unit(depth, lines, start_pos(node.span), end_pos(node.span))]

    def _layout(self, node: ast.Layout, depth: int) -> list[Unit]:
        # Paths, dims and placements line up in columns, like a table; the dims column
        # only while every row still fits the width.
        rows = [(e.path.text, format_dims(e.dims), layout_rest(e)) for e in node.entries]
        path_width = max((len(path) for path, _, _ in rows), default=0)
        dims_width = max((len(dims) for _, dims, _ in rows), default=0)
        longest = max((len(rest) for _, _, rest in rows), default=0)
        if len(INDENT * (depth + 1)) + path_width + dims_width + longest + 2 > WIDTH:
            dims_width = 0
        inner = [u for (path, dims, rest), entry in zip(rows, node.entries, strict=True)
                 for u in self._stmt(f"{path.ljust(path_width)} {dims.ljust(dims_width)} {rest}",
                                     entry.span, depth + 1)]
        return self._wrap("layout", node.span, after_pos(node.span, 6), inner, depth)

    def _cost(self, node: ast.CostBlock, depth: int) -> list[Unit]:
        # One term per line, the `=` signs lined up.
        heads = [f"{t.unit.value} {t.name.value}" for t in node.terms]
        width = max((len(head) for head in heads), default=0)
        inner = [u for head, term in zip(heads, node.terms, strict=True)
                 for u in self._stmt(f"{head.ljust(width)} = {cost_rest(term)}", term.span, depth + 1)]
        return self._wrap("cost", node.span, after_pos(node.span, 4), inner, depth)

    def _field_decl(self, node: ast.FieldDecl, depth: int) -> list[Unit]:
        # A declaration past 120 columns continues with its meaning, indented twice.
        head, meaning = format_field_decl(node)
        fits = len(INDENT * depth + head + meaning) < WIDTH
        lines = (f"{head} {meaning}",) if fits else (head, INDENT * 2 + meaning)
        return [Unit(depth, lines, start_pos(node.span), end_pos(node.span), group="field")]

    def _named(self, node: ast.Profile | ast.Family, depth: int) -> list[Unit]:
        keyword = "profile" if isinstance(node, ast.Profile) else "family"
        return self._block(f"{keyword} {node.name.value}", node, end_pos(node.name.span),
                           node.items, depth)

    def _machine(self, node: ast.Device | ast.Cluster, depth: int) -> list[Unit]:
        keyword = "device" if isinstance(node, ast.Device) else "cluster"
        return self._block(f"{keyword} {node.name.value}", node, end_pos(node.name.span), node.items, depth)

    def _curve(self, node: ast.Curve, depth: int) -> list[Unit]:
        entries = [(f"{format_literal(p.size)} {format_literal(p.efficiency)}", p.span) for p in node.points]
        return self._inline(f"curve {node.name.value}", node.span, end_pos(node.name.span), entries, depth)

    def _tier(self, node: ast.Tier, depth: int) -> list[Unit]:
        entries = [(f"{s.key.value} = {format_literal(s.value)}", s.span) for s in node.settings]
        return self._inline(f"tier {node.name.value}", node.span, end_pos(node.name.span), entries, depth)

    def _kind(self, node: ast.Kind, depth: int) -> list[Unit]:
        header = f"kind {node.name.value}"
        if node.base is not None:
            header += f" from {node.base.value}"
        header_end = end_pos((node.base or node.name).span)
        return self._block(header, node, header_end, node.items, depth)

    def _kind_dims(self, node: ast.KindDims, depth: int) -> list[Unit]:
        # On one line while it fits, like a tier's settings; else one entry per line.
        entries = [(f"{e.field.value} = {format_dim(e.value)}", e.span) for e in node.entries]
        return self._inline("dims", node.span, after_pos(node.span, 4), entries, depth)

    def _settings(self, node: ast.SettingsBlock, depth: int) -> list[Unit]:
        header = " ".join([node.block, *(format_literal(t) for t in node.types)])
        header_end = end_pos(node.types[-1].span) if node.types else after_pos(node.span, len(node.block))
        entries = [(f"{s.key.value} = {format_literal(s.value)}", s.span) for s in node.settings]
        return self._inline(header, node.span, header_end, entries, depth)

    def _ops(self, node: ast.OpsBlock, depth: int) -> list[Unit]:
        entries = [(f"{c.op.value} {format_literal(c.count)}", c.span) for c in node.counts]
        return self._inline("ops", node.span, after_pos(node.span, 3), entries, depth)

    def _model(self, node: ast.Model, depth: int) -> list[Unit]:
        header = f"model {node.name.value}"
        if node.profile is not None:
            header += f" : {node.profile.value}"
        header_end = end_pos((node.profile or node.name).span)
        return self._block(header, node, header_end, node.items, depth)

    def _model_block(self, node: ast.Block, depth: int) -> list[Unit]:
        entries = [(field_text(f), f.span) for f in node.fields]
        return self._inline(node.name.value, node.span, end_pos(node.name.span), entries, depth)

    def _import_rules(self, node: ast.ImportRules, depth: int) -> list[Unit]:
        header = " ".join(["hf", *(format_literal(t) for t in node.types)])
        header_end = end_pos(node.types[-1].span) if node.types else after_pos(node.span, 2)
        return self._block(header, node, header_end, node.rules, depth)

    def _read(self, node: ast.HfRead, depth: int) -> list[Unit]:
        # Past 120 columns the keys fill further lines, indented twice.
        words = [k.value for k in node.keys]
        line = "read " + " ".join(words)
        if len(INDENT * depth + line) <= WIDTH:
            return self._stmt(line, node.span, depth)
        lines = fill_words(words, WIDTH - len(INDENT) * (depth + 2), " ")
        shown = ("read " + lines[0], *(INDENT * 2 + rest for rest in lines[1:]))
        return [Unit(depth, shown, start_pos(node.span), end_pos(node.span))]

    def _ignore(self, node: ast.HfIgnore, depth: int) -> list[Unit]:
        entries = [(ignored_text(k), k.span) for k in node.keys]
        header = f"{'unmodelled' if node.unmodelled else 'ignore'} {format_literal(node.reason)}"
        return self._filled(header, node.span, end_pos(node.reason.span), entries, depth)

    def _pattern(self, node: ast.HfPattern, depth: int) -> list[Unit]:
        entries = [(f"{format_literal(s.symbol)} -> {s.kind.value}", s.span) for s in node.symbols]
        return self._inline(f"pattern {node.key.value}", node.span, end_pos(node.key.span), entries, depth)

    def _filled(self, header: str, span: Span, header_end: Pos, entries: Sequence[tuple[str, Span]],
                depth: int) -> list[Unit]:
        """Like _inline, but a block too long for one line fills its entries into lines (no comment inside)."""
        line = f"{header} {{ {'  '.join(text for text, _ in entries)} }}"
        if not entries or len(INDENT * depth + line) <= WIDTH or self._has_comment(header_end, span):
            return self._inline(header, span, header_end, entries, depth)
        lines = fill_words([text for text, _ in entries], WIDTH - len(INDENT) * (depth + 1), "  ")
        body = Unit(depth + 1, tuple(lines), start_pos(entries[0][1]), end_pos(entries[-1][1]))
        return self._wrap(header, span, header_end, [body], depth)

    def _layer_types(self, node: ast.LayerTypes, depth: int) -> list[Unit]:
        names = [n.value for n in node.names]
        line = f"layer_types [{', '.join(names)}]"
        if len(INDENT * depth + line) <= WIDTH:
            return self._stmt(line, node.span, depth)
        lines = ["layer_types [", *fill_items(names, WIDTH - len(INDENT) * (depth + 1)), "]"]
        indented = [lines[0], *(INDENT + line for line in lines[1:-1]), lines[-1]]
        return [Unit(depth, tuple(indented), start_pos(node.span), end_pos(node.span))]


__all__ = ["format_dim", "format_dims", "format_expr", "format_file", "format_literal",
           "format_placement", "format_source", "format_stack_list"]
