"""The tokens of the fast parser (hpdsl/syntax/fast.py) and the steps its rules are made of.

One compiled regex reads Lark's terminals (grammar/hpdsl.lark) at C speed into
parallel lists of kinds, texts, lines and columns; comments are kept as
ast.Comment on the way. Anything the fast path is not sure of raises Defer.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Any

import attrs

from hpdsl import ast
from hpdsl.diagnostics.span import Span
from hpdsl.syntax.text import unquote

# Lark's terminals (grammar/hpdsl.lark) in the order its lexer tries them, each after the
# blanks before it, on one line (no token spans a newline); the last alternative is any
# other character, which Lark rejects. findall on each line runs at C speed.
_TOKEN = re.compile(r"""([ \t\f\r]*)(
  (?://|\#)[^\n]*
| -?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?
| -?[0-9]+
| [A-Za-z_][A-Za-z0-9_]*
| "(?:[^"\\\n]|\\.)*"
| ==|!=|<=|>=|->|\.\.|[<>{}\[\]():,=*/+.]
| [^ \t\f\r])""", re.VERBOSE)

# What a token is, by its first character: n a word, d a number, p punctuation (the kind is
# the text), s a string, c a comment; '/' and '-' start more than one terminal.
_FIRST = {**dict.fromkeys(string.ascii_letters + "_", "n"), **dict.fromkeys(string.digits, "d"),
          **dict.fromkeys("<>{}[]():,=*+.!", "p"), '"': "s", "#": "c", "/": "/", "-": "-"}

_AFTER_LITERAL = frozenset({"accepts", "activation", "and", "cost", "curve", "default", "derive", "factory", "field",
                            "hf", "ignore", "layer_types", "layout", "map", "mlp", "norm", "or", "parallel", "params",
                            "pattern", "read", "require", "selector", "stack", "tier", "true", "false",
                            "unmodelled", "variant", "weight", "wiring"})
_LITERAL_KINDS = frozenset({"i", "f", "s"})

# Below parser.MAX_NESTING with room to spare: one level here is at most a few tree levels there.
MAX_DEPTH = 20
# Integers of up to this many digits are below parser.MAX_INT; longer ones go to Lark's check.
MAX_DIGITS = 18


# Span, Name and Literal have no validators or converters (tests/syntax/test_fast_parse.py checks), so
# setting their slots builds what their attrs __init__ builds, in two thirds of the time:
# a parse makes one Span per node and per name, the largest share of its work.
_NEW = object.__new__
_SPAN_FIELDS = tuple(Span.__dict__[f.name].__set__ for f in attrs.fields(Span))
_SET_FILE, _SET_LINE, _SET_COL, _SET_END_LINE, _SET_END_COL = _SPAN_FIELDS
_SET_NAME_VALUE, _SET_NAME_SPAN = (ast.Name.__dict__[f.name].__set__ for f in attrs.fields(ast.Name))
_SET_VALUE, _SET_KIND, _SET_SPAN = (ast.Literal.__dict__[f.name].__set__ for f in attrs.fields(ast.Literal))


def new_span(file: str, line: int, col: int, end_line: int, end_col: int) -> Span:
    """Return Span(file, line, col, end_line, end_col)."""
    span: Span = _NEW(Span)
    _SET_FILE(span, file)
    _SET_LINE(span, line)
    _SET_COL(span, col)
    _SET_END_LINE(span, end_line)
    _SET_END_COL(span, end_col)
    return span


def new_name(value: str, span: Span) -> ast.Name:
    """Return ast.Name(value, span=span)."""
    name: ast.Name = _NEW(ast.Name)
    _SET_NAME_VALUE(name, value)
    _SET_NAME_SPAN(name, span)
    return name


def _token_span(file: str, line: int, col: int, text: str) -> Span:
    span: Span = _NEW(Span)
    _SET_FILE(span, file)
    _SET_LINE(span, line)
    _SET_COL(span, col)
    _SET_END_LINE(span, line)
    _SET_END_COL(span, col + len(text))
    return span


def _token_name(file: str, line: int, col: int, text: str) -> ast.Name:
    """Return the ast.Name of a word token (tokens lie on one line)."""
    name: ast.Name = _NEW(ast.Name)
    _SET_NAME_VALUE(name, text)
    _SET_NAME_SPAN(name, _token_span(file, line, col, text))
    return name


def new_literal(value: int | float | bool | str, kind: ast.LiteralKind, span: Span) -> ast.Literal:
    """Return ast.Literal(value, kind, span=span)."""
    literal: ast.Literal = _NEW(ast.Literal)
    _SET_VALUE(literal, value)
    _SET_KIND(literal, kind)
    _SET_SPAN(literal, span)
    return literal


class Defer(Exception):
    """Raised inside the fast parser: leave this text to Lark."""


def _kind(first: str, token: str) -> str:
    """Return the kind of a token that is not a word, from what its first character says."""
    if first == "p":
        return token
    if first == "d" or (first == "-" and len(token) > 1 and token != "->"):
        return "f" if "." in token else "i"
    if first == "s" and len(token) > 1:
        return "s"
    if first == "c" or (first == "/" and token.startswith("//")):
        return "c"
    if first == "/" or token == "->":
        return token
    raise Defer


class Tokens:
    """The token lists of one text and the steps of recursive descent over them."""

    def __init__(self, name: str, text: str) -> None:
        self.path = name
        kinds: list[str] = []
        texts: list[str] = []
        lines: list[int] = []
        cols: list[int] = []
        comments: list[ast.Comment] = []
        first = _FIRST.get
        add_kind, add_text, add_line, add_col = kinds.append, texts.append, lines.append, cols.append
        for line, text_line in enumerate(text.split("\n"), start=1):
            col = 1
            for blank, token in _TOKEN.findall(text_line):
                col += len(blank)
                kind = first(token[0], "x")
                if kind == "p":
                    kind = token
                elif kind != "n":
                    kind = _kind(kind, token)
                    if kind == "c":
                        end = col + len(token)
                        comments.append(ast.Comment(token.rstrip(), span=Span(name, line, col, line, end)))
                        col = end
                        continue
                add_kind(kind)
                add_text(token)
                add_line(line)
                add_col(col)
                col += len(token)
        kinds.append("$")  # the end: matches nothing the parser looks for
        texts.append("")
        self.kinds, self.texts, self.lines, self.cols = kinds, texts, lines, cols
        self.comments = tuple(comments)
        self.i = 0
        self.depth = 0
        self.reserved = -1  # the index of a word after a literal that Lark reads as a keyword

    # --- tokens ----------------------------------------------------------

    def span(self, first: int, last: int) -> Span:
        """Return the span from token `first` to the end of token `last`."""
        return new_span(self.path, self.lines[first], self.cols[first], self.lines[last],
                        self.cols[last] + len(self.texts[last]))

    def word(self) -> str:
        """Return the text of the current token if it is a word, else ''."""
        return self.texts[self.i] if self.kinds[self.i] == "n" else ""

    def expect(self, kind: str) -> int:
        """Consume a token of `kind` (punctuation: its text); return its index."""
        i = self.i
        if self.kinds[i] != kind:
            raise Defer
        self.i = i + 1
        return i

    def keyword(self, text: str) -> int:
        """Consume the keyword `text`; return its index."""
        i = self.i
        if self.kinds[i] != "n" or self.texts[i] != text:
            raise Defer
        self.i = i + 1
        return i

    def name(self, allowed: frozenset[str] = frozenset()) -> ast.Name:
        """Consume a name."""
        i = self.i
        if self.kinds[i] != "n" or (i == self.reserved and self.texts[i] not in allowed):
            raise Defer
        self.i = i + 1
        return _token_name(self.path, self.lines[i], self.cols[i], self.texts[i])

    def string(self) -> ast.Literal:
        """Consume a STRING token as a string literal."""
        i = self.expect("s")
        return new_literal(unquote(self.texts[i]), "string", self.span(i, i))

    def int(self) -> ast.Literal:
        """Consume an INT token as an int literal."""
        i = self.expect("i")
        text = self.texts[i]
        if len(text) > MAX_DIGITS:
            raise Defer
        return new_literal(int(text), "int", self.span(i, i))

    def at_literal(self) -> bool:
        """Whether the current token starts a `literal`."""
        return self.kinds[self.i] in _LITERAL_KINDS or self.word() in ("true", "false")

    def literal(self) -> ast.Literal:
        """The `literal` rule: INT, FLOAT, true, false or STRING."""
        i = self.i
        kind, text = self.kinds[i], self.texts[i]
        value: int | float | bool | str
        literal: ast.LiteralKind
        if kind == "i":
            if len(text) > MAX_DIGITS:
                raise Defer
            value, literal = int(text), "int"
        elif kind == "s":
            value, literal = unquote(text), "string"
        elif kind == "f":
            value, literal = float(text), "float"
        elif kind == "n" and (text == "true" or text == "false"):
            value, literal = text == "true", "bool"
        else:
            raise Defer
        self.i = i + 1
        node = new_literal(value, literal, _token_span(self.path, self.lines[i], self.cols[i], text))
        if self.kinds[self.i] == "n" and self.texts[self.i] in _AFTER_LITERAL:
            self.reserved = self.i
        return node

    def comma_list(self, item: Callable[[], Any], close: str) -> list[Any]:
        """`item (, item)* ,? close`, the opener already consumed; the close consumed too."""
        items = [item()]
        while self.kinds[self.i] == ",":
            self.i += 1
            if self.kinds[self.i] == close:
                break
            items.append(item())
        self.expect(close)
        return items

    def nested(self) -> None:
        """Count one level of recursion; too deep is Lark's to report."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Defer
