"""Parse .hpf text into an AST, turning Lark's failures into located diagnostics."""

from __future__ import annotations

from functools import cache

from lark import Lark, Token, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from hpdsl import ast
from hpdsl.diagnostics import Diagnostic, Source, Span
from hpdsl.errors import SpecError
from hpdsl.resources import data_dir
from hpdsl.syntax.transformer import ToAst

# How terminals read in "expected ..." messages.
_WORDS = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "STRING": "a string",
    "COMPARE": "a comparison (==, !=, <, <=, >, >=)", "TRUE": "'true'", "FALSE": "'false'",
    "NORM": "'norm'", "MLP": "'mlp'", "ACTIVATION": "'activation'", "$END": "the end of the file",
}


class _CommentSink:
    """Receives COMMENT tokens from the lexer (ignored tokens never reach the tree)."""

    def __init__(self) -> None:
        self.tokens: list[Token] = []

    def __call__(self, token: Token) -> Token:
        self.tokens.append(token)
        return token


_COMMENTS = _CommentSink()


@cache
def _parser() -> Lark:
    return Lark.open(str(data_dir("grammar") / "hpdsl.lark"), parser="lalr",
                     propagate_positions=True, maybe_placeholders=False,
                     lexer_callbacks={"COMMENT": _COMMENTS})


def parse_text(text: str, name: str = "<string>") -> ast.File:
    """Parse one .hpf text; raise SpecError carrying the syntax diagnostic."""
    return parse_source(Source(name, text))


def parse_source(source: Source) -> ast.File:
    """Parse a Source into an ast.File with its comments; raise SpecError on bad syntax."""
    parser = _parser()
    _COMMENTS.tokens = []
    try:
        tree = parser.parse(source.text)
    except UnexpectedInput as exc:
        diagnostic = _syntax_diagnostic(exc, source)
        raise SpecError(f"{source.name}: syntax error", (diagnostic,)) from None
    comments, _COMMENTS.tokens = _COMMENTS.tokens, []
    file = ToAst(source.name).transform(tree)
    return ast.File(source.name, file.items, tuple(_comment(c, source.name) for c in comments),
                    span=file.span)


def _comment(token: Token, file: str) -> ast.Comment:
    span = Span(file, token.line, token.column, token.end_line, token.end_column)
    return ast.Comment(str(token).rstrip(), span=span)


def _syntax_diagnostic(exc: UnexpectedInput, source: Source) -> Diagnostic:
    line, col = max(exc.line, 1), max(exc.column, 1)
    if isinstance(exc, UnexpectedCharacters):
        char = source.text[exc.pos_in_stream] if exc.pos_in_stream < len(source.text) else "?"
        return Diagnostic(Span(source.name, line, col, line, col + 1), "unexpected-character",
                          f"found the character {char!r}, which starts no token here",
                          hint=_expected_hint(exc.allowed))
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        last = source.text.rstrip().splitlines() or [""]
        end_line = len(last)
        span = Span(source.name, end_line, len(last[-1]) + 1, end_line, len(last[-1]) + 2)
        return Diagnostic(span, "unexpected-end", "the file ends inside an unfinished construct",
                          hint=_expected_hint(exc.expected) + "; is a '}' or ']' missing?")
    assert isinstance(exc, UnexpectedToken)
    token = exc.token
    end = token.end_column if token.end_line == token.line else col + 1
    return Diagnostic(Span(source.name, line, col, line, max(end, col + 1)), "syntax-error",
                      f"found {_describe(token)} where it cannot stand",
                      hint=_expected_hint(exc.expected))


def _describe(token: Token) -> str:
    if token.type in ("NAME", "INT", "FLOAT", "STRING"):
        return f"{_WORDS[token.type].split(' ', 1)[1]} {str(token)!r}"
    return repr(str(token))


def _expected_hint(expected: set[str] | None) -> str:
    words = sorted({_word(name) for name in (expected or ())})
    if not words:
        return "check the statement before this point"
    if len(words) > 8:
        words = words[:8] + ["..."]
    return "expected " + ", ".join(words)


def _word(terminal: str) -> str:
    if terminal in _WORDS:
        return _WORDS[terminal]
    try:
        pattern = _parser().get_terminal(terminal).pattern
    except KeyError:
        return terminal.lower()
    if pattern.type == "str":
        return repr(pattern.value)
    return terminal.lower().lstrip("_")
