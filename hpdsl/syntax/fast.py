"""A fast path for valid .hpf text: a regex tokenizer and a recursive-descent parser.

Lark (grammar/hpdsl.lark, hpdsl/syntax/parser.py) stays the definition of the
language and the author of every syntax diagnostic. This module builds the same
ast.File that Lark's parse and ToAst build (every node, span and comment) for
text Lark accepts, and on any doubt (a token it does not expect, a long integer,
deep nesting, a large file) returns None so the caller parses with Lark.
tests/syntax/test_fast_parse.py holds the two equal, spans included.

Each method mirrors one grammar rule, and a node spans its rule's tokens, from
the first to the last, as Lark's propagated positions do: parentheses around an
expression belong to the enclosing node's span, not to the expression's own.
Lark's contextual lexer reads a word as a keyword only where its parser state
expects that keyword, so the methods compare a word's text only where the
grammar allows the keyword (see fast_tokens.py for the one state that reads more).
"""

from __future__ import annotations

from typing import Any

from hpdsl import ast
from hpdsl.acyclic import acyclic_allocations
from hpdsl.diagnostics.span import Span
from hpdsl.syntax.fast_family import AFTER_EXPRESSION
from hpdsl.syntax.fast_rules import ImportRuleRules
from hpdsl.syntax.fast_tokens import Defer
from hpdsl.syntax.text import without_bom

_CHOICES = frozenset({"norm", "mlp", "activation", "wiring"})


def fast_parse(name: str, text: str, max_chars: int, max_line: int) -> ast.File | None:
    """Return the ast.File Lark would build for `text`, or None where Lark must decide."""
    text = without_bom(text)  # as Lark's path does (hpdsl/syntax/parser.py lark_parse)
    if len(text) > max_chars or (len(text) > max_line and max(map(len, text.split("\n"))) > max_line):
        return None
    with acyclic_allocations():  # the tree holds no cycles (hpdsl/acyclic.py)
        try:
            return _Parser(name, text).file()
        except (Defer, RecursionError):
            return None


class _Parser(ImportRuleRules):
    """The grammar's rules over the tokens of one text."""

    def file(self) -> ast.File:
        """start: _item*"""
        items = []
        while self.kinds[self.i] != "$":
            items.append(self.declaration())
        span = self.span(0, self.i - 1) if items else Span.point(self.path)
        return ast.File(self.path, tuple(items), self.comments, span=span)

    def declaration(self) -> ast.Declaration:
        """_item: import_decl | vocabulary | slots_block | profile | family | model"""
        start, word = self.i, self.word()
        self.i += 1
        if word == "import":
            return ast.ImportDecl(self.string(), span=self.span(start, start + 1))
        if word == "vocabulary":
            ops = self.braced(self.op_decl)
            return ast.Vocabulary(ops, span=self.span(start, self.i - 1))
        if word == "slots":
            return self.slots_block(start)
        if word == "profile":
            name = self.name()
            return ast.Profile(name, self.braced(self.profile_item), span=self.span(start, self.i - 1))
        if word == "family":
            name = self.name()
            return ast.Family(name, self.braced(self.family_item), span=self.span(start, self.i - 1))
        if word == "model":
            return self.model(start)
        if word == "device":
            name = self.name()
            return ast.Device(name, self.braced(self.device_item), span=self.span(start, self.i - 1))
        if word == "cluster":
            name = self.name()
            return ast.Cluster(name, self.braced(self.cluster_item), span=self.span(start, self.i - 1))
        if word == "field":
            return self.field_decl(start)
        raise Defer

    def braced(self, item: Any) -> tuple[Any, ...]:
        """`{ item* }`."""
        self.expect("{")
        items = []
        while self.kinds[self.i] != "}":
            items.append(item())
        self.i += 1
        return tuple(items)

    def op_decl(self) -> ast.OpDecl:
        """op_decl: NAME STRING"""
        start = self.i
        name = self.name()
        return ast.OpDecl(name, self.string(), span=self.span(start, self.i - 1))

    def slots_block(self, start: int) -> ast.SlotsBlock:
        """slots_block: "slots" { slot_binding* }, the keyword consumed."""
        bindings = self.braced(self.slot_binding)
        return ast.SlotsBlock(bindings, span=self.span(start, self.i - 1))

    def slot_binding(self) -> ast.SlotBinding:
        """slot_binding: NAME NAME"""
        start = self.i
        slot = self.name()
        return ast.SlotBinding(slot, self.name(), span=self.span(start, self.i - 1))

    # --- devices and clusters ---------------------------------------------

    def device_item(self) -> ast.DeviceItem:
        """_device_item: setting | curve"""
        start = self.i
        if self.word() != "curve":
            return self.setting()
        self.i += 1
        name = self.name()
        points = self.braced(self.curve_point)
        return ast.Curve(name, points, span=self.span(start, self.i - 1))

    def curve_point(self) -> ast.CurvePoint:
        """curve_point: number number (INT or FLOAT each)"""
        start = self.i
        size = self.number()
        efficiency = self.number()
        return ast.CurvePoint(size, efficiency, span=self.span(start, self.i - 1))

    def number(self) -> ast.Literal:
        """number: INT | FLOAT"""
        if self.kinds[self.i] not in ("i", "f"):
            raise Defer
        return self.literal()

    def cluster_item(self) -> ast.ClusterItem:
        """_cluster_item: setting | tier"""
        start = self.i
        if self.word() != "tier":
            return self.setting()
        self.i += 1
        name = self.name()
        settings = self.braced(self.setting)
        return ast.Tier(name, settings, span=self.span(start, self.i - 1))

    # --- profiles --------------------------------------------------------

    def profile_item(self) -> ast.ProfileItem:
        """_profile_item: kind | default_kind | run_block | model_block | facts_block | model_types | slots_block
        | import_rules"""
        start, word = self.i, self.word()
        self.i += 1
        if word == "kind":
            return self.kind(start)
        if word == "default":
            return ast.DefaultKind(self.name(), span=self.span(start, start + 1))
        if word == "run" or word == "model":
            block: ast.SettingsBlockKind = "run" if word == "run" else "model"
            settings = self.braced(self.setting)
            return ast.SettingsBlock(block, settings, span=self.span(start, self.i - 1))
        if word == "facts":
            types = []
            while self.kinds[self.i] == "s":
                types.append(self.string())
            settings = self.braced(self.setting)
            return ast.SettingsBlock("facts", settings, tuple(types), span=self.span(start, self.i - 1))
        if word == "model_types":
            types = [self.string()]
            while self.kinds[self.i] == "s":
                types.append(self.string())
            return ast.ModelTypes(tuple(types), span=self.span(start, self.i - 1))
        if word == "slots":
            return self.slots_block(start)
        if word == "hf":
            return self.import_rules(start)
        if word == "field":
            return self.field_decl(start)
        raise Defer

    def setting(self) -> ast.Setting:
        """setting: (NAME | NORM | MLP | ACTIVATION | WIRING) = literal"""
        start = self.i
        key = self.name(_CHOICES)
        self.expect("=")
        value = self.literal()
        return ast.Setting(key, value, span=self.span(start, self.i - 1))

    def kind(self, start: int) -> ast.Kind:
        """kind: "kind" NAME kind_base? { _kind_item* }, the keyword consumed."""
        name = self.name()
        base = None
        if self.word() == "from":
            self.i += 1
            base = self.name()
        items = self.braced(self.kind_item)
        return ast.Kind(name, base, items, span=self.span(start, self.i - 1))

    def kind_item(self) -> ast.KindItem:
        """_kind_item: ops_block | attention_flavour | ffn_flavour | kind_wiring | slots_block | kind_dims"""
        start, word = self.i, self.word()
        self.i += 1
        if word == "ops":
            counts = self.braced(self.op_count)
            return ast.OpsBlock(counts, span=self.span(start, self.i - 1))
        if word == "attention":
            return ast.AttentionFlavour(self.name(), span=self.span(start, start + 1))
        if word == "ffn":
            return ast.FfnFlavour(self.name(), span=self.span(start, start + 1))
        if word == "wiring":
            return ast.KindWiring(self.name(), span=self.span(start, start + 1))
        if word == "slots":
            return self.slots_block(start)
        if word == "dims":
            entries = self.braced(self.kind_dim)
            return ast.KindDims(entries, span=self.span(start, self.i - 1))
        raise Defer

    def kind_dim(self) -> ast.KindDim:
        """kind_dim: NAME = dim"""
        start = self.i
        if self.kinds[start - 1] != "{" and self.word() in AFTER_EXPRESSION:
            raise Defer  # after the previous entry's expression Lark may read the word as a keyword
        field = self.name()
        self.expect("=")
        value = self.dim()
        return ast.KindDim(field, value, span=self.span(start, self.i - 1))

    def op_count(self) -> ast.OpCount:
        """op_count: NAME literal"""
        start = self.i
        op = self.name()
        count = self.literal()
        return ast.OpCount(op, count, span=self.span(start, self.i - 1))

    # --- models ----------------------------------------------------------

    def model(self, start: int) -> ast.Model:
        """model: "model" NAME (: NAME)? { _model_item* }, the keyword consumed."""
        name = self.name()
        profile = None
        if self.kinds[self.i] == ":":
            self.i += 1
            profile = self.name()
        items = self.braced(self.model_item)
        return ast.Model(name, profile, items, span=self.span(start, self.i - 1))

    def model_item(self) -> ast.ModelItem:
        """_model_item: field | block | choice | stack | layer_types"""
        start, word = self.i, self.word()
        if word in _CHOICES:
            self.i += 1
            key = self.span(start, start)
            return ast.Choice(ast.Name(word, span=key), self.name(), span=self.span(start, start + 1))
        if word == "stack":
            self.i += 1
            body = self.stack_list()
            return ast.Stack(body, span=self.span(start, self.i - 1))
        if word == "layer_types":
            self.i += 1
            self.expect("[")
            names = self.comma_list(self.name, "]")
            return ast.LayerTypes(tuple(names), span=self.span(start, self.i - 1))
        name = self.name()
        if self.kinds[self.i] == "{":
            fields = self.braced(self.field)
            return ast.Block(name, fields, span=self.span(start, self.i - 1))
        value = self.literal() if self.at_literal() else None
        return ast.Field(name, value, span=self.span(start, self.i - 1))

    def field(self) -> ast.Field:
        """field: NAME literal?"""
        start = self.i
        name = self.name()
        value = self.literal() if self.at_literal() else None
        return ast.Field(name, value, span=self.span(start, self.i - 1))

    def stack_list(self) -> ast.StackList:
        """stack_list: [ _stack_item (, _stack_item)* ,? ] repeat?"""
        start = self.expect("[")
        self.nested()
        items = self.comma_list(self.stack_item, "]")
        self.depth -= 1
        repeat = self.repeat()
        return ast.StackList(tuple(items), repeat, span=self.span(start, self.i - 1))

    def stack_item(self) -> ast.StackKind | ast.StackList:
        """_stack_item: stack_kind | stack_list"""
        if self.kinds[self.i] == "[":
            return self.stack_list()
        start = self.i
        kind = self.name()
        repeat = self.repeat()
        return ast.StackKind(kind, repeat, span=self.span(start, self.i - 1))

    def repeat(self) -> ast.Literal | None:
        """repeat: * INT (optional)."""
        if self.kinds[self.i] != "*":
            return None
        self.i += 1
        return self.int()
