"""The parser: every construct into its AST node, 1-based spans, comments, syntax diagnostics."""

from __future__ import annotations

import re

import pytest

from hpdsl import ast
from hpdsl.diagnostics import Diagnostic, Span
from hpdsl.errors import SpecError
from hpdsl.syntax import parse_text
from hpdsl.syntax import parser as parser_module

N = ast.Name


def lit(value: int | float | bool | str) -> ast.Literal:
    kind = {bool: "bool", int: "int", float: "float", str: "string"}[type(value)]
    return ast.Literal(value, kind)  # type: ignore[arg-type]


def only(text: str) -> ast.Declaration:
    file = parse_text(text)
    assert len(file.items) == 1
    return file.items[0]


def body(wrapper: str, text: str) -> tuple:
    """Parse `text` inside a declaration (`family f { ... }`) and return the body's items."""
    node = only(wrapper.replace("...", text))
    return node.items  # type: ignore[union-attr]


def error(text: str) -> Diagnostic:
    with pytest.raises(SpecError) as info:
        parse_text(text)
    (diagnostic,) = info.value.diagnostics
    return diagnostic


# --------------------------------------------------------------------------
# Constructs
# --------------------------------------------------------------------------


def test_empty_file() -> None:
    assert parse_text("") == ast.File("<string>", ())
    assert parse_text("  \n// only a comment\n").items == ()


def test_import_and_vocabulary() -> None:
    file = parse_text('import "a.hpf"\nvocabulary { attMM "projections"  linrec "state" }')
    assert file.items == (
        ast.ImportDecl(lit("a.hpf")),
        ast.Vocabulary((ast.OpDecl(N("attMM"), lit("projections")),
                        ast.OpDecl(N("linrec"), lit("state")))),
    )


def test_profile_items() -> None:
    profile = only("""
        profile qwen3_5 {
          run { shard_activations = true  grad_bytes = 2 }
          model { v_head_dim = 128 }
          facts "qwen3_next" "qwen3_5" { rope = 1.5 }
          facts { eps = -1.0e-06 }
          default full_attention
          model_types "qwen3_next" "qwen3_5"
          kind full_attention { ops { attMM 4  attBMM 2 } }
          kind linear_attention from full_attention { attention linear  ffn moe  ops { linrec 1 } }
        }""")
    assert profile == ast.Profile(N("qwen3_5"), (
        ast.SettingsBlock("run", (ast.Setting(N("shard_activations"), lit(True)),
                                  ast.Setting(N("grad_bytes"), lit(2)))),
        ast.SettingsBlock("model", (ast.Setting(N("v_head_dim"), lit(128)),)),
        ast.SettingsBlock("facts", (ast.Setting(N("rope"), lit(1.5)),),
                          (lit("qwen3_next"), lit("qwen3_5"))),
        ast.SettingsBlock("facts", (ast.Setting(N("eps"), lit(-1.0e-06)),)),
        ast.DefaultKind(N("full_attention")),
        ast.ModelTypes((lit("qwen3_next"), lit("qwen3_5"))),
        ast.Kind(N("full_attention"), None, (ast.OpsBlock((
            ast.OpCount(N("attMM"), lit(4)), ast.OpCount(N("attBMM"), lit(2)))),)),
        ast.Kind(N("linear_attention"), N("full_attention"), (
            ast.AttentionFlavour(N("linear")), ast.FfnFlavour(N("moe")),
            ast.OpsBlock((ast.OpCount(N("linrec"), lit(1)),)))),
    ))


def test_family_items() -> None:
    items = body("family f { ... }", """
        factory "pkg.mod:Cls"
        parallel ep
        selector a: bool = false
        selector n: int
        selector r: int(-1..4) = 2
        selector m: enum(eager, fused,) = eager
        require a -> n > 1 "a needs n"
        variant x "pkg.mod:X" default
        variant y "pkg.mod:Y" when parallel and not a accepts(cfg, mesh,)
    """)
    assert items == (
        ast.Factory(lit("pkg.mod:Cls")),
        ast.ParallelAxis(N("ep")),
        ast.Selector(N("a"), ast.BoolType(), lit(False)),
        ast.Selector(N("n"), ast.IntType(None, None), None),
        ast.Selector(N("r"), ast.IntType(lit(-1), lit(4)), lit(2)),
        ast.Selector(N("m"), ast.EnumType((N("eager"), N("fused"))), N("eager")),
        ast.Require(ast.Implies(ast.Reference(N("a")), ast.Comparison(N("n"), ">", lit(1))),
                    lit("a needs n")),
        ast.Variant(N("x"), lit("pkg.mod:X"), True, None, ()),
        ast.Variant(N("y"), lit("pkg.mod:Y"), False,
                    ast.AllOf((ast.Reference(N("parallel")), ast.Negation(ast.Reference(N("a"))))),
                    (N("cfg"), N("mesh"))),
    )


def test_slots_blocks_at_top_level_in_profiles_and_in_kinds() -> None:
    file = parse_text("""
        slots { attention attention  norm norm }
        profile p {
          slots { mlp gated }
          kind k from j { slots { experts grouped_experts  head output_head }  ops { a 1 } }
        }""")
    top, profile = file.items
    assert top == ast.SlotsBlock((ast.SlotBinding(N("attention"), N("attention")),
                                  ast.SlotBinding(N("norm"), N("norm"))))
    assert profile == ast.Profile(N("p"), (
        ast.SlotsBlock((ast.SlotBinding(N("mlp"), N("gated")),)),
        ast.Kind(N("k"), N("j"), (
            ast.SlotsBlock((ast.SlotBinding(N("experts"), N("grouped_experts")),
                            ast.SlotBinding(N("head"), N("output_head")))),
            ast.OpsBlock((ast.OpCount(N("a"), lit(1)),)))),
    ))
    assert parse_text("slots {}").items == (ast.SlotsBlock(()),)


def test_slot_binding_spans() -> None:
    (block,) = parse_text("slots {\n  mlp  gated_mlp\n}", "s.hpf").items
    assert block.span == Span("s.hpf", 1, 1, 3, 2)
    (binding,) = block.bindings
    assert _at(binding) == (2, 3, 2, 17)
    assert _at(binding.slot) == (2, 3, 2, 6)
    assert _at(binding.family) == (2, 8, 2, 17)


def condition(text: str) -> ast.Expr:
    (require,) = body("family f { ... }", f"require {text}")
    return require.condition


A, B, C = (ast.Reference(N(x)) for x in "abc")


@pytest.mark.parametrize(("text", "expected"), [
    ("a or b and c", ast.AnyOf((A, ast.AllOf((B, C))))),
    ("a and b or c", ast.AnyOf((ast.AllOf((A, B)), C))),
    ("a and b and c", ast.AllOf((A, B, C))),
    ("(a and b) and c", ast.AllOf((ast.AllOf((A, B)), C))),
    ("a or b -> c", ast.Implies(ast.AnyOf((A, B)), C)),
    ("not a and b", ast.AllOf((ast.Negation(A), B))),
    ("not not a", ast.Negation(ast.Negation(A))),
    ("not (a or b)", ast.Negation(ast.AnyOf((A, B)))),
    ("(a -> b) -> c", ast.Implies(ast.Implies(A, B), C)),
    ("true or false", ast.AnyOf((ast.Constant(True), ast.Constant(False)))),
    ("tp != 1", ast.Comparison(N("tp"), "!=", lit(1))),
    ("backend == eager", ast.Comparison(N("backend"), "==", N("eager"))),
    ("x <= -2.5", ast.Comparison(N("x"), "<=", lit(-2.5))),
    ('ep in (1, 2, "s", true, y,)', ast.Membership(N("ep"), (lit(1), lit(2), lit("s"), lit(True),
                                                             N("y")))),
])
def test_conditions(text: str, expected: ast.Expr) -> None:
    assert condition(text) == expected


def test_model_items() -> None:
    model = only("""
        model qwen3_next : qwen3_5 {
          hidden 2048  rope 1.0e+6  name "q"  tie false  shared_gate
          moe { experts 512  top_k 10  shared_gate }
          norm rmsnorm  mlp gated  activation silu
          stack [linear_attention * 3, full_attention] * 12
          layer_types [a, b,]
        }""")
    assert model == ast.Model(N("qwen3_next"), N("qwen3_5"), (
        ast.Field(N("hidden"), lit(2048)), ast.Field(N("rope"), lit(1.0e6)),
        ast.Field(N("name"), lit("q")), ast.Field(N("tie"), lit(False)),
        ast.Field(N("shared_gate"), None),
        ast.Block(N("moe"), (ast.Field(N("experts"), lit(512)), ast.Field(N("top_k"), lit(10)),
                             ast.Field(N("shared_gate"), None))),
        ast.Choice(N("norm"), N("rmsnorm")), ast.Choice(N("mlp"), N("gated")),
        ast.Choice(N("activation"), N("silu")),
        ast.Stack(ast.StackList((ast.StackKind(N("linear_attention"), lit(3)),
                                 ast.StackKind(N("full_attention"), None)), lit(12))),
        ast.LayerTypes((N("a"), N("b"))),
    ))
    assert only("model m {}") == ast.Model(N("m"), None, ())


def test_nested_stack_lists() -> None:
    (stack,) = body("model m { ... }", "stack [dense, [moe * 2, [dense]] * 3,]")
    assert stack.body == ast.StackList((
        ast.StackKind(N("dense"), None),
        ast.StackList((ast.StackKind(N("moe"), lit(2)),
                       ast.StackList((ast.StackKind(N("dense"), None),), None)), lit(3)),
    ), None)


def test_literal_kinds_stay_apart() -> None:
    fields = body("model m { ... }", 'a 1  b 1.0  c true  d "1"  e -7')
    assert [(f.value.value, f.value.kind) for f in fields] == [
        (1, "int"), (1.0, "float"), (True, "bool"), ("1", "string"), (-7, "int")]


def test_string_escapes() -> None:
    (field,) = body("model m { ... }", r'name "a \"q\" \\ b\n\tc"')
    assert field.value.value == 'a "q" \\ b\n\tc'


def test_keywords_are_names_where_no_keyword_can_stand() -> None:
    # The contextual lexer reads `kind` as a name inside a model body.
    assert body("model m { ... }", "kind 3") == (ast.Field(N("kind"), lit(3)),)
    # ... and `attention`, `norm`, `mlp`, `model` as names inside a slots block.
    (block,) = parse_text("slots { attention norm  mlp model  norm slots }").items
    assert [(b.slot.value, b.family.value) for b in block.bindings] == [
        ("attention", "norm"), ("mlp", "model"), ("norm", "slots")]


@pytest.mark.parametrize(("text", "message", "hint"), [
    ("profilefull_attention{}", "found the name 'profilefull_attention' at the top level",
     "expected the end of the file, 'cluster', 'device', 'family', 'field', 'import', 'model', 'profile', "
     "'slots' or 'vocabulary'"),
    ("profile p { kinds k { } }", "found the name 'kinds' in profile 'p'",
     "expected 'default', 'facts', 'field', 'hf', 'kind', 'model', 'model_types', 'run', 'slots' or '}'"),
    ("profile p { kindx { } }", "found the name 'kindx' in profile 'p'",
     "expected 'default', 'facts', 'field', 'hf', 'kind', 'model', 'model_types', 'run', 'slots' or '}'"),
    ("profile p { run { a = truex = 1 } }", "found the name 'truex' in the run block of profile 'p'",
     "expected a number, a string, an integer, 'false' or 'true'"),
])
def test_a_keyword_ends_at_a_word_boundary(text: str, message: str, hint: str) -> None:
    # Where a keyword but no name may stand, Lark's contextual lexer would split `kinds` into
    # `kind s`; a keyword glued to name characters is one name, and an error there.
    diagnostic = error(text)
    assert (diagnostic.code, diagnostic.message, diagnostic.hint) == ("syntax-error", message, hint)
    assert parser_module.fast_parse("t.hpf", text, 1 << 18, 100_000) is None


def test_keywords_still_read_next_to_punctuation_and_names_with_keyword_prefixes() -> None:
    file = parse_text("profile p{kind k{ops{a 1}}run{a=true true_x=false}}")
    (profile,) = file.items
    assert isinstance(profile, ast.Profile)
    kind, run = profile.items
    assert isinstance(kind, ast.Kind) and isinstance(run, ast.SettingsBlock)
    assert [(s.key.value, s.value.value) for s in run.settings] == [("a", True), ("true_x", False)]
    (field,) = body("model m { ... }", "kinds 3")
    assert field.name.value == "kinds"


# --------------------------------------------------------------------------
# Spans
# --------------------------------------------------------------------------


def _at(node: ast.Name | ast.Literal | object) -> tuple[int, int, int, int]:
    span = node.span  # type: ignore[attr-defined]
    return (span.line, span.col, span.end_line, span.end_col)


def test_spans_are_one_based_and_exact() -> None:
    file = parse_text("model m : p {\n  hidden 2048\n  moe { top_k 2 }\n}\n", "m.hpf")
    model = file.items[0]
    assert model.span == Span("m.hpf", 1, 1, 4, 2)
    assert _at(model.name) == (1, 7, 1, 8)
    assert _at(model.profile) == (1, 11, 1, 12)
    field, block = model.items
    assert _at(field) == (2, 3, 2, 14)
    assert _at(field.name) == (2, 3, 2, 9)
    assert _at(field.value) == (2, 10, 2, 14)
    assert _at(block) == (3, 3, 3, 18)
    assert _at(block.fields[0].value) == (3, 15, 3, 16)


def test_condition_spans() -> None:
    (require,) = body("family f { ... }", 'require a and tp > 1 "msg"')
    assert _at(require) == (1, 12, 1, 38)
    assert _at(require.condition) == (1, 20, 1, 32)
    assert _at(require.condition.operands[1]) == (1, 26, 1, 32)
    assert _at(require.condition.operands[1].right) == (1, 31, 1, 32)
    assert _at(require.message) == (1, 33, 1, 38)


def test_lines_count_newlines_only() -> None:
    # A form feed is whitespace, not a line break; CRLF counts once.
    file = parse_text("model m {\r\n\x0c  hidden 1\r\n}")
    assert _at(file.items[0].items[0]) == (2, 4, 2, 12)


# --------------------------------------------------------------------------
# Comments
# --------------------------------------------------------------------------


def test_comments_are_collected_in_order_with_spans() -> None:
    file = parse_text("// head\nmodel m {  # trailing   \n  hidden 1 // x\n}\n// tail")
    assert [c.text for c in file.comments] == ["// head", "# trailing", "// x", "// tail"]
    assert [_at(c)[:2] for c in file.comments] == [(1, 1), (2, 12), (3, 12), (5, 1)]


def test_comments_do_not_leak_between_parses() -> None:
    parse_text("// one")
    with pytest.raises(SpecError):
        parse_text("// two\nmodel {")
    assert [c.text for c in parse_text("// three").comments] == ["// three"]


def test_comment_markers_inside_strings_are_text() -> None:
    file = parse_text('model m { url "http://x#y" }')
    assert file.comments == ()
    assert file.items[0].items[0].value.value == "http://x#y"


# --------------------------------------------------------------------------
# Syntax errors
# --------------------------------------------------------------------------

TERMINAL_NAME = re.compile(r"\b_?[A-Z][A-Z_]+\b")


def assert_reads_as_words(diagnostic: Diagnostic) -> None:
    for text in (diagnostic.message, diagnostic.hint or ""):
        # Placeholders inside `code` examples (NAME, TYPE) are meant for the reader.
        assert not TERMINAL_NAME.search(re.sub(r"`[^`]*`", "", text)), text
        assert "$END" not in text


@pytest.mark.parametrize(("text", "code", "position", "hint"), [
    ("model m : p {\n  hidden 1\n", "unexpected-end", (2, 11), "close model 'm' with '}'"),
    ("model m {\n  stack [a, b\n\n  \n", "unexpected-end", (2, 14), "close the stack with ']'"),
    ("profile p { kind a { ops { x 1 } }", "unexpected-end", (1, 35), "close profile 'p' with '}'"),
    ("model m {\n  hidden 1 @\n}", "unexpected-character", (2, 12), "expected"),
    ("model m { hidden 1 \x00 }", "unexpected-character", (1, 20), "expected"),
    ('family f {\n  factory "abc\n}', "unexpected-character", (2, 11), "close it with '\"'"),
    ("model m {\n  hidden 1\n  }}", "syntax-error", (3, 4), "expected"),
    ("profile p {\n  run { a 1 }\n}", "syntax-error", (2, 11), "`key = value`"),
    ("model m {\n  hidden = 1\n}", "syntax-error", (2, 10), "without '='"),
    ("model m { moe { experts: 3 } }", "syntax-error", (1, 24), "without '=' or ':'"),
    ("profile p { kind k { ops { a = 1 } } }", "syntax-error", (1, 30), "`attMM 4`"),
    ("family f { require a -> b -> c }", "syntax-error", (1, 27), "'->' does not chain"),
    ("family f { require a = 1 }", "syntax-error", (1, 22), "compare with '=='"),
    ("model m { stack [a b] }", "syntax-error", (1, 20), "with ','"),
    ("model m { layer_types [a b] }", "syntax-error", (1, 26), "with ','"),
    ("family f { selector a bool }", "syntax-error", (1, 23), "`selector NAME: TYPE`"),
    ("family f { variant v when a }", "syntax-error", (1, 22), "as a string"),
    ("family f { factory a.b }", "syntax-error", (1, 20), "is a string"),
    ("import a", "syntax-error", (1, 8), "is a string"),
    ("model m\n  hidden 1\n}", "syntax-error", (2, 3), "open the body with '{'"),
    ("profile p kind", "syntax-error", (1, 11), "open the body with '{'"),
    ("profile p { kind k ops { a 1 } }", "syntax-error", (1, 20), "open the body with '{'"),
    ("profile p { model m { } }", "syntax-error", (1, 19), "close the profile"),
    ("model m { stack 3 }", "syntax-error", (1, 17), "expected '['"),
    ("family f { selector a: float }", "syntax-error", (1, 24), "expected 'bool', 'enum' or 'int'"),
    ("slots { mlp = mlp }", "syntax-error", (1, 13), "a slot binding is a slot name and a family name"),
    ("profile p { slots { mlp } }", "syntax-error", (1, 25), "`SLOT FAMILY`"),
    ("slots mlp mlp", "syntax-error", (1, 7), "expected '{'"),
])
def test_syntax_errors(text: str, code: str, position: tuple[int, int], hint: str) -> None:
    diagnostic = error(text)
    assert (diagnostic.code, (diagnostic.span.line, diagnostic.span.col)) == (code, position)
    assert hint in (diagnostic.hint or ""), diagnostic.hint
    assert_reads_as_words(diagnostic)


def test_message_names_what_was_found_and_where() -> None:
    diagnostic = error("profile p {\n  kind k from b {\n    ops { a 1 ] }\n  }\n}")
    assert diagnostic.message == "found ']' in the ops block of kind 'k'"
    assert diagnostic.hint == "expected a name or '}'"
    assert error("model m { hidden 1 } }").message == "found '}' at the top level"
    assert error("family f { variant v \"x\" when a b }").message == (
        "found the name 'b' in the when condition of variant 'v'")


def test_unexpected_token_span_covers_the_token() -> None:
    diagnostic = error("model m { stack [a, b] * x }")
    assert (diagnostic.span.col, diagnostic.span.end_col) == (26, 27)
    diagnostic = error("profile p { kind k { ops { a 1 } } attention full }")
    assert (diagnostic.span.col, diagnostic.span.end_col) == (36, 45)


@pytest.mark.parametrize("hint", sorted({hint for hint, _, _ in parser_module._MISTAKES}))
def test_every_mistake_example_gets_its_hint(hint: str) -> None:
    for mistake, _, examples in parser_module._MISTAKES:
        if mistake == hint:
            for example in examples:
                assert error(example).hint == hint, example


def test_too_deep_nesting_is_reported_not_a_crash() -> None:
    diagnostic = error("family f { require " + "not " * 300 + "a }")
    assert diagnostic.code == "nesting-too-deep"
    diagnostic = error("model m { stack " + "[" * 200 + "a" + "]" * 200 + " }")
    assert diagnostic.code == "nesting-too-deep"
    assert diagnostic.span.line == 1 and diagnostic.span.col > 16
    # Parentheses leave no tree node, but brackets of every kind count: past 100, an error at the 101st.
    assert parse_text("family f { require " + "(" * 90 + "a" + ")" * 90 + " }")
    diagnostic = error("family f { require " + "(" * 300 + "a" + ")" * 300 + " }")
    assert diagnostic.code == "nesting-too-deep" and diagnostic.span.col == 20 + 99
    diagnostic = error('family f { require a }  // "' + "(" * 300 + '\n' + 'x "' + "[" * 300 + '" }')
    assert diagnostic.code != "nesting-too-deep"  # brackets in comments and strings do not count


def test_huge_integer_is_reported_not_a_crash() -> None:
    text = "model m {\n  hidden " + "9" * 5000 + "\n}"
    diagnostic = error(text)
    assert diagnostic.code == "literal-too-large"
    assert (diagnostic.span.line, diagnostic.span.col) == (2, 10)
