"""A Pygments lexer for .hpf files, registered as the `pygments.lexers` entry point `hpdsl`.

Docs and READMEs render ```hpdsl blocks highlighted with it. Its tokens follow
grammar/hpdsl.lark; a keyword that is also a name elsewhere (`attention` is a
kind item, a slot and a family) is shown as a keyword. Nothing else in hpdsl
imports this module, so pygments is needed only by whoever highlights.
"""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Whitespace

KEYWORDS = (
    "import", "vocabulary", "slots", "profile", "family", "model", "kind", "from", "default",
    "run", "facts", "model_types", "ops", "attention", "ffn", "factory", "parallel", "selector",
    "require", "variant", "when", "accepts", "params", "layout", "by", "for", "if", "stack",
    "layer_types", "cost", "replicate", "recompute", "sequence", "routed", "at", "with", "without", "flash",
    "in", "and", "or", "not", "bool", "int", "enum", "norm", "mlp",
    "activation", "wiring", "dims",
    "hf", "map", "read", "ignore", "pattern", "derive", "weight", "transposed", "split", "join", "interleaved", "unset",
    "unmodelled",
    "device", "cluster", "curve", "tier", "field", "float", "string", "required",
)
"""Every keyword of grammar/hpdsl.lark (tests/test_editors.py keeps the two in step)."""


class HpdslLexer(RegexLexer):
    """Lexer for hpdsl .hpf specs: profiles, families and models."""

    name = "hpdsl"
    aliases = ["hpdsl", "hpf"]
    filenames = ["*.hpf"]
    mimetypes = ["text/x-hpdsl"]

    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"(//|#).*?$", Comment.Single),
            (r'"([^"\\\n]|\\.)*"', String.Double),
            (r"(profile|family|model|kind|variant|selector)(\s+)([A-Za-z_]\w*)",
             bygroups(Keyword.Declaration, Whitespace, Name.Class)),
            (r"(true|false)\b", Keyword.Constant),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (r"-?[0-9]+\.[0-9]+([eE][-+]?[0-9]+)?", Number.Float),
            (r"-?[0-9]+", Number.Integer),
            (r"->|==|!=|<=|>=|<|>|\.\.|[*/+=]", Operator),
            (r"[{}\[\](),:.]", Punctuation),
            (r"[A-Za-z_]\w*", Name),
        ],
    }
