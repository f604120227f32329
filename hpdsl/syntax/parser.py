"""Parse .hpf text into an AST, turning Lark's failures into located diagnostics.

A syntax diagnostic says what was found, inside which construct ("in kind 'k'
of profile 'p'"), and either a domain hint for a common mistake (a missing '='
in a setting, a chained '->') or the tokens that could stand there, as words.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator
from functools import cache
from typing import Any

from lark import Lark, Token, Tree, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternRE, TerminalDef

from hpdsl import ast
from hpdsl.diagnostics import Diagnostic, Source, Span
from hpdsl.diagnostics.diagnostic import sort_key
from hpdsl.errors import SpecError
from hpdsl.syntax.fast import fast_parse  # noqa: F401 - the fast path beside Lark's, for tests and benches
from hpdsl.syntax.limits import MAX_FILE_CHARS, MAX_LINE_CHARS
from hpdsl.syntax.tables import grammar_text, load_parser
from hpdsl.syntax.text import without_bom
from hpdsl.syntax.transformer import ToAst

# Deeper trees would exhaust Python's recursion in the transformer and the checks.
MAX_NESTING = 100

# The largest integer literal (every count, width and bound fits far below it, and products of
# two stay exact in 64-bit arithmetic downstream); the file and line caps are in limits.py.
MAX_INT = 1 << 62

# How terminals read in "expected ..." hints; keywords and punctuation read as themselves.
_WORDS = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "STRING": "a string",
    "COMPARE": "a comparison (==, !=, <, <=, >, >=)", "$END": "the end of the file",
}

# Common mistakes: (hint, whether any token in the failing state is this mistake, examples).
# Each example fails at the mistake; a failure in the same parser state (and, unless
# `any_token`, on the same kind of token) gets the hint.
_MISTAKES: tuple[tuple[str, bool, tuple[str, ...]], ...] = (
    ("a setting is written `key = value`", True,
     ("profile p { run { a 1 } }",)),
    ("a model field is a name and a value, without '=' or ':': write `hidden 2048`", False,
     ("model m { a = 1 }", "model m { a : 1 }", "model m { b { a = 1 } }",
      "model m { b { a : 1 } }")),
    ("an op count is an op name and a number, without '=' or ':': write `attMM 4`", False,
     ("profile p { kind k { ops { a = 1 } } }", "profile p { kind k { ops { a : 1 } } }")),
    ("a slot binding is a slot name and a family name, without '=' or ':': write `mlp mlp`", False,
     ("slots { a = b }", "slots { a : b }", "profile p { slots { a = b } }",
      "profile p { kind k { slots { a : b } } }")),
    ("each slot is followed by the family that fills it: write `SLOT FAMILY`, e.g. `mlp mlp`", False,
     ("slots { a }", "slots { a b c }")),
    ("'->' does not chain: put parentheses around one side, `a -> (b -> c)`", False,
     ("family f { require a -> b -> c }",)),
    ("compare with '==', not '=': `name == value`", False,
     ("family f { require a = 1 }",)),
    ("separate the items of a stack list with ','", False,
     ("model m { stack [a b] }", "model m { stack [a * 2 b] }", "model m { stack [a [b]] }",
      "model m { stack [[a] b] }", "model m { stack [[a] [b]] }", "model m { stack [a * 2 [b]] }")),
    ("separate the names with ','", False,
     ("model m { layer_types [a b] }",)),
    ("a selector is written `selector NAME: TYPE`", True,
     ("family f { selector a bool }",)),
    ("a variant names its class as a string: `variant NAME \"package.module:Class\"`", True,
     ("family f { variant v default }",)),
    ("a layout entry is `PATH (DIMS) PLACEMENT`: write `up_proj.weight (ffn_width, hidden) colwise`",
     True, ("family f { layout { a colwise } }", "family f { layout { a.b colwise } }")),
    ("the factory is a string: `factory \"package.module:Name\"`", True,
     ("family f { factory x }",)),
    ("the imported path is a string: `import \"other.hpf\"`", True,
     ("import x",)),
    ("open the body with '{' after the name", True,
     ("profile p x", "family f x", "vocabulary x", "profile p { run x", "profile p { model 3",
      "profile p { kind k { ops x", "profile p { kind k from b x")),
    ("open the body with '{' after the name (and `: PROFILE`, if any)", True,
     ("model m x", "model m : p x")),
    ("open the body with '{' after the name (and `from BASE`, if any)", True,
     ("profile p { kind k x",)),
    ("a profile's `model { ... }` block takes no name; to declare a model, close the profile "
     "with '}' first", False,
     ("profile p { model m {",)),
)

# Keywords that open a construct, and how the construct reads in "in ..." phrases.
_CONSTRUCTS = {
    "PROFILE": "profile", "FAMILY": "family", "MODEL": "model", "KIND": "kind",
    "VOCABULARY": "the vocabulary", "RUN": "the run block", "FACTS": "the facts block",
    "OPS": "the ops block", "STACK": "the stack", "LAYER_TYPES": "layer_types",
    "SELECTOR": "selector", "VARIANT": "variant", "REQUIRE": "a require condition",
    "WHEN": "the when condition", "ACCEPTS": "the accepts list", "IMPORT": "an import",
    "FACTORY": "the factory", "MODEL_TYPES": "model_types", "LAYOUT": "the layout block",
    "PARAMS": "the params list", "SLOTS": "the slots block", "DEVICE": "device", "CLUSTER": "cluster",
    "CURVE": "curve", "TIER": "tier",
}
_NAMED = {"PROFILE", "FAMILY", "MODEL", "KIND", "SELECTOR", "VARIANT", "DEVICE", "CLUSTER", "CURVE", "TIER"}
_OPENERS = {"_LBRACE": "}", "_LSQB": "]", "_LPAR": ")"}
_TRAILING_WS = re.compile(r"[ \t\f\r\n]*\Z")


class _CommentSink:
    """Receives COMMENT tokens from the lexer (ignored tokens never reach the tree).

    The parser is shared, so the tokens are kept per thread.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def start(self) -> None:
        """Forget the comments of any earlier parse on this thread."""
        self._local.tokens = []

    def take(self) -> list[Token]:
        """Return the comments collected since start()."""
        tokens: list[Token] = getattr(self._local, "tokens", [])
        self._local.tokens = []
        return tokens

    def __call__(self, token: Token) -> Token:
        if not hasattr(self._local, "tokens"):
            self._local.tokens = []
        self._local.tokens.append(token)
        return token


_COMMENTS = _CommentSink()

# A keyword ends where a name would (grammar/hpdsl.lark, "Literals and terminals"). Lark's
# contextual lexer tries only the terminals its parser state expects, so where a keyword but
# no name may stand, a bare string keyword would read `kinds {` as `kind s {` and `truex` as
# `true x`. Every keyword becomes this regex, tried before NAME (priority 1) where both may stand,
# as the string keyword was; the grammar keeps its "kind" strings, which editors and tests read.
_KEYWORD_END = "(?![A-Za-z0-9_])"


def _end_keyword(terminal: TerminalDef) -> None:
    pattern = terminal.pattern
    if pattern.type == "str" and pattern.value.isidentifier():
        terminal.pattern = PatternRE(re.escape(pattern.value) + _KEYWORD_END, pattern.flags, pattern.raw)
        terminal.priority = 1


def keyword_text(terminal: TerminalDef) -> str | None:
    """Return the keyword a terminal of the loaded parser reads, or None for any other terminal."""
    value = terminal.pattern.value
    if terminal.pattern.type == "re" and value.endswith(_KEYWORD_END):
        word = value[:-len(_KEYWORD_END)]
        return word if word.isidentifier() else None
    return None


def parser_options() -> dict[str, Any]:
    """Return the options the grammar's parser is built with."""
    return {"parser": "lalr", "propagate_positions": True, "maybe_placeholders": False,
            "lexer_callbacks": {"COMMENT": _COMMENTS}, "edit_terminals": _end_keyword}


KEYWORD_SALT = _KEYWORD_END
"""What edit_terminals does leaves no trace in the options: the shipped tables' key carries it."""


@cache
def _parser() -> Lark:
    # The tables shipped beside the grammar, or built in memory (hpdsl/syntax/tables.py).
    return load_parser(grammar_text(), parser_options(), KEYWORD_SALT)


def lark_parse(source: Source) -> ast.File:
    """Parse with Lark alone, the language's reference (the fast path is tested against it)."""
    source = Source(source.name, without_bom(source.text))
    oversize = _size_problem(source)
    if oversize is not None:
        raise SpecError(f"{source.name}: too large", (oversize,))
    parser = _parser()
    _COMMENTS.start()
    try:
        tree = parser.parse(source.text)
    except UnexpectedInput as exc:
        diagnostic = _syntax_diagnostic(exc, source)
        raise SpecError(f"{source.name}: syntax error", (diagnostic,)) from None
    comments = _COMMENTS.take()
    problems = tuple(sorted(_tree_problems(tree, source.name), key=sort_key))
    if problems:
        raise SpecError(f"{source.name}: syntax error", problems)
    file = ToAst(source.name).transform(tree)
    return ast.File(source.name, file.items, tuple(_comment(c, source.name) for c in comments),
                    span=file.span)


# Brackets, and what may hide one: a string or a comment (as the grammar's STRING and COMMENT).
_BRACKETS = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|#[^\n]*|[(\[{]|[)\]}]')


def _bracket_problem(source: Source) -> Diagnostic | None:
    """Return a diagnostic at the first bracket nested past MAX_NESTING, before the parser sees it.

    Parentheses leave no node in the parse tree, so the tree's depth check
    (_tree_problems) cannot see them; one linear pass over the brackets of every
    construct (blocks, stack lists, conditions, dims expressions) bounds them all.
    """
    depth = 0
    for match in _BRACKETS.finditer(source.text):
        char = match.group()
        if char in "([{":
            depth += 1
            if depth > MAX_NESTING:
                line = source.text.count("\n", 0, match.start()) + 1
                col = match.start() - (source.text.rfind("\n", 0, match.start()) + 1) + 1
                return Diagnostic(Span(source.name, line, col, line, col + 1), "nesting-too-deep",
                                  f"brackets nest more than {MAX_NESTING} deep here",
                                  hint="flatten it: name the parts, or use repetition (`* N`)")
        elif char in ")]}":
            depth = max(depth - 1, 0)
    return None


def _size_problem(source: Source) -> Diagnostic | None:
    """Return a diagnostic for a file or a line over the caps, or brackets nested too deep."""
    text = source.text
    if len(text) > MAX_FILE_CHARS:
        return Diagnostic(Span(source.name, 1, 1, 1, 2), "file-too-large",
                          f"the file has {len(text):,} characters, more than {MAX_FILE_CHARS:,}",
                          hint="split it into files that import each other")
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line) > MAX_LINE_CHARS:
            col = MAX_LINE_CHARS + 1
            return Diagnostic(Span(source.name, number, col, number, col + 1), "line-too-long",
                              f"line {number} has {len(line):,} characters, more than "
                              f"{MAX_LINE_CHARS:,}", hint="break it over several lines")
    return _bracket_problem(source)


def _comment(token: Token, file: str) -> ast.Comment:
    return ast.Comment(str(token).rstrip(), span=_token_span(token, file))


def _token_span(token: Token, file: str) -> Span:
    return Span(file, token.line or 1, token.column or 1, token.end_line or 1,
                token.end_column or 2)


# --------------------------------------------------------------------------
# Trees the grammar accepts but the compiler cannot hold
# --------------------------------------------------------------------------


def _tree_problems(tree: Tree, file: str) -> Iterator[Diagnostic]:
    """Yield a diagnostic for the first over-deep nesting and for integers Python will not read."""
    digits = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    todo: list[tuple[Tree, int]] = [(tree, 1)]
    too_deep = False
    while todo:  # iterative, in source order: the point is not to recurse into a deep tree
        node, depth = todo.pop()
        if depth > MAX_NESTING:
            if not too_deep:
                yield _too_deep(node, file)
            too_deep = True
            continue
        for child in reversed(node.children):
            if isinstance(child, Tree):
                todo.append((child, depth + 1))
            else:
                yield from _literal_problem(child, file, digits)


def _literal_problem(token: Token, file: str, digits: int) -> Iterator[Diagnostic]:
    """Yield a diagnostic for an integer beyond MAX_INT."""
    text = token.lstrip("-")
    if token.type == "INT" and digits and len(text) > digits:
        yield Diagnostic(_token_span(token, file), "literal-too-large",
                         f"found an integer of {len(text)} digits",
                         hint=f"integers have at most {digits} digits")
    elif token.type == "INT" and (len(text) > 19 or int(text) > MAX_INT):
        yield Diagnostic(_token_span(token, file), "literal-too-large",
                         f"the integer {_abridged(str(token))} is beyond the largest the "
                         f"compiler holds, 2^62 = {MAX_INT}",
                         hint="every count, width and bound is far smaller; check the digits")


def _abridged(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text)} characters)"


def _too_deep(node: Tree, file: str) -> Diagnostic:
    line, col = getattr(node.meta, "line", 1), getattr(node.meta, "column", 1)
    return Diagnostic(Span(file, line, col, line, col + 1), "nesting-too-deep",
                      f"this condition, stack list or dims expression nests more than {MAX_NESTING} deep",
                      hint="flatten it: name the parts, or use repetition (`* N`)")


# --------------------------------------------------------------------------
# Syntax errors
# --------------------------------------------------------------------------


def _syntax_diagnostic(exc: UnexpectedInput, source: Source) -> Diagnostic:
    frames, opener = _open_constructs(exc)
    where = _where(frames)
    accepts = _accepts(exc)
    if isinstance(exc, UnexpectedCharacters):
        return _bad_character(exc, source, where, accepts)
    token = getattr(exc, "token", None)
    if not isinstance(exc, UnexpectedToken) or token is None or token.type == "$END":
        hint = f"close {frames[-1][0] if frames else 'it'} with {opener!r}" if opener else None
        return Diagnostic(_end_span(source), "unexpected-end", f"the file ends {where}",
                          hint=hint or _expected_hint(accepts))
    line, col = max(exc.line, 1), max(exc.column, 1)
    end = token.end_column if token.end_line == token.line and token.end_column else col + 1
    span = Span(source.name, line, col, line, max(end, col + 1))
    hint = _mistake(exc, token.type) or _expected_hint(accepts)
    return Diagnostic(span, "syntax-error", f"found {_describe(token)} {where}", hint=hint)


def _bad_character(exc: UnexpectedCharacters, source: Source, where: str,
                   accepts: set[str]) -> Diagnostic:
    line, col = max(exc.line, 1), max(exc.column, 1)
    span = Span(source.name, line, col, line, col + 1)
    pos = exc.pos_in_stream or 0  # lark's class attribute is None; UnexpectedCharacters sets the position
    char = source.text[pos] if pos < len(source.text) else "?"
    if char == '"':
        return Diagnostic(span, "unexpected-character",
                          f"found a string that is not closed {where}",
                          hint='close it with \'"\' on the same line; write \\n for a newline '
                               'and \\" for a quote')
    return Diagnostic(span, "unexpected-character",
                      f"found the character {char!r} {where}, which starts no token",
                      hint=_expected_hint(accepts))


def _end_span(source: Source) -> Span:
    """Point just after the last character that is not whitespace (Lark counts lines by '\\n')."""
    text = _TRAILING_WS.sub("", source.text)
    line = text.count("\n") + 1
    col = len(text) - (text.rfind("\n") + 1) + 1
    return Span(source.name, line, col, line, col + 1)


def _accepts(exc: UnexpectedInput) -> set[str]:
    """Return the terminals that could stand at the failure (exact, by trying each one)."""
    parser = getattr(exc, "interactive_parser", None)
    if parser is not None:
        try:
            return set(parser.accepts())
        except Exception:  # a best-effort refinement; the LALR table's set still holds
            pass
    return set(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())


def _open_constructs(exc: UnexpectedInput) -> tuple[list[tuple[str, bool]], str | None]:
    """Return the unfinished constructs (description, body opened), innermost last, and the
    closer the innermost open bracket needs."""
    parser = getattr(exc, "interactive_parser", None)
    stack: list[Any] = list(parser.parser_state.value_stack) if parser is not None else []
    frames: list[list[Any]] = []  # [token type, name, body opened]
    closers: list[str] = []
    previous: Any = None
    for value in stack:
        # Finished constructs are reduced to trees, but the last one may still be
        # tokens when the error comes before its reduction: closers pop them here.
        if isinstance(value, Token):
            _step(frames, closers, value, previous)
        previous = value
    described = [(_describe_frame(kind, name), opened) for kind, name, opened in frames]
    return described, closers[-1] if closers else None


def _step(frames: list[list[Any]], closers: list[str], token: Token, previous: Any) -> None:
    if token.type in _OPENERS:
        closers.append(_OPENERS[token.type])
    elif token.type in ("_RBRACE", "_RSQB", "_RPAR") and closers:
        closers.pop()
    if token.type in _CONSTRUCTS:
        frames.append([token.type, None, False])
    elif token.type == "NAME" and frames and frames[-1][1] is None and not frames[-1][2]:
        frames[-1][1] = str(token)
    elif token.type == "_LBRACE":
        if frames and not frames[-1][2]:
            frames[-1][2] = True
        elif isinstance(previous, Token) and previous.type == "NAME":
            frames.append(["BLOCK", str(previous), True])
    elif token.type == "_RBRACE":
        while frames and not frames.pop()[2]:
            pass


def _describe_frame(kind: str, name: str | None) -> str:
    if kind == "BLOCK":
        return f"block '{name}'"
    if kind == "MODEL" and name is None:
        return "the model block"
    label = _CONSTRUCTS[kind]
    return f"{label} '{name}'" if kind in _NAMED and name else label


def _where(frames: list[tuple[str, bool]]) -> str:
    if not frames:
        return "at the top level"
    names = [description for description, _ in frames[-2:]]
    return "in " + " of ".join(reversed(names))


def _mistake(exc: UnexpectedToken, token_type: str) -> str | None:
    parser = getattr(exc, "interactive_parser", None)
    if parser is None:
        return None
    table = _mistake_table()
    state = parser.parser_state.position
    return table.get((state, token_type)) or table.get((state, None))


@cache
def _mistake_table() -> dict[tuple[Any, str | None], str]:
    """Map (parser state, token type or None for any) to the hint of a common mistake.

    Like Lark's `match_examples`, but built once, and keyed on the LALR state alone
    (match_examples also compares the stack depth, so a mistake nested one level
    deeper than its example would go unlabelled).
    """
    table: dict[tuple[Any, str | None], str] = {}
    for hint, any_token, examples in _MISTAKES:
        for example in examples:
            try:
                _parser().parse(example)
            except UnexpectedToken as exc:
                state = exc.interactive_parser.parser_state.position
                table.setdefault((state, None if any_token else exc.token.type), hint)
    return table


def _describe(token: Token) -> str:
    text = str(token)
    if len(text) > 40:
        text = text[:37] + "..."
    if token.type in ("NAME", "INT", "FLOAT", "STRING"):
        noun = {"NAME": "the name", "INT": "the integer", "FLOAT": "the number",
                "STRING": "the string"}[token.type]
        return f"{noun} {text}" if token.type in ("INT", "FLOAT", "STRING") else f"{noun} {text!r}"
    if text.isidentifier():
        return f"the keyword {text!r}"
    return repr(text)


def _expected_hint(expected: set[str]) -> str:
    words = sorted({_word(name) for name in expected}, key=_word_order)
    if not words:
        return "check the statement before this point"
    if len(words) > 10:  # a profile's or file's ten statement words read better in full than "one of 2 more"
        return "expected " + ", ".join(words[:8]) + f" or one of {len(words) - 8} more"
    if len(words) == 1:
        return "expected " + words[0]
    return "expected " + ", ".join(words[:-1]) + " or " + words[-1]


def _word_order(word: str) -> tuple[int, str]:
    # Values first, then keywords, then punctuation, so the likeliest fix reads first.
    if not word.startswith("'"):
        return (0, word)
    return (1, word) if word[1:-1].isidentifier() else (2, word)


def _word(terminal: str) -> str:
    if terminal in _WORDS:
        return _WORDS[terminal]
    try:
        pattern = _parser().get_terminal(terminal).pattern
    except KeyError:
        return terminal.lower().lstrip("_")
    keyword = keyword_text(_parser().get_terminal(terminal))
    if keyword is not None:
        return repr(keyword)
    if pattern.type == "str":
        return repr(pattern.value)
    return terminal.lower().lstrip("_")
