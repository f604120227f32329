"""The fast parser's rules for a profile's import rules: `hf ["model_type" ...] { ... }`.

Part of the fast path (hpdsl/syntax/fast.py); each method mirrors one rule of
grammar/hpdsl.lark ("Import rules"). Lark's contextual lexer reads the rule
keywords as keywords wherever a rule may start, so `read KEY ...` ends at the
first of them, as it does here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hpdsl import ast
from hpdsl.syntax.fast_family import FamilyRules
from hpdsl.syntax.fast_tokens import Defer

_RULE_KEYWORDS = frozenset({"default", "map", "read", "ignore", "pattern", "derive", "weight", "unmodelled"})


class ImportRuleRules(FamilyRules):
    """The rules of `hf ... { ... }` inside a profile."""

    def import_rules(self, start: int) -> ast.ImportRules:
        """import_rules: "hf" STRING* { _import_rule* }, the keyword consumed."""
        types = []
        while self.kinds[self.i] == "s":
            types.append(self.string())
        rules = self._braced(self.import_rule)
        return ast.ImportRules(tuple(types), rules, span=self.span(start, self.i - 1))

    def _braced(self, item: Callable[[], Any]) -> tuple[Any, ...]:
        self.expect("{")
        items = []
        while self.kinds[self.i] != "}":
            items.append(item())
        self.i += 1
        return tuple(items)

    def import_rule(self) -> ast.HfRule:
        """_import_rule: hf_default | hf_map | hf_read | hf_ignore | hf_pattern | hf_derive | hf_weight
                        | hf_unmodelled"""
        start, word = self.i, self.word()
        self.i += 1
        if word == "default":
            return self._default(start)
        if word == "map":
            key = self.key()
            self.expect("->")
            first = self.name()
            block = None
            if self.kinds[self.i] == ".":
                self.i += 1
                block, first = first, self.name()
            values = self._braced(self.value) if self.kinds[self.i] == "{" else ()
            return ast.HfMap(key, first, block, span=self.span(start, self.i - 1), values=values)
        if word == "read":
            keys = [self.name()]
            while self.kinds[self.i] == "n" and self.texts[self.i] not in _RULE_KEYWORDS:
                keys.append(self.name())
            return ast.HfRead(tuple(keys), span=self.span(start, self.i - 1))
        if word in ("ignore", "unmodelled"):
            reason = self.string()
            entries = self._braced(self.ignored)
            return ast.HfIgnore(reason, entries, span=self.span(start, self.i - 1), unmodelled=word == "unmodelled")
        if word == "pattern":
            key = self.name()
            symbols = self._braced(self.symbol)
            return ast.HfPattern(key, symbols, span=self.span(start, self.i - 1))
        if word == "derive":
            field = self.name()
            self.expect("=")
            value = self.dim()
            return ast.HfDerive(field, value, span=self.span(start, self.i - 1))
        if word == "weight":
            return self._weight(start)
        raise Defer

    def value(self) -> ast.HfValue:
        """hf_value: literal -> (literal | NAME)"""
        start = self.i
        stated = self.literal()
        self.expect("->")
        target = self.literal() if self.at_literal() else self.name()
        return ast.HfValue(stated, target, span=self.span(start, self.i - 1))

    def _weight(self, start: int) -> ast.HfWeight:
        """hf_weight: "weight" (STRING | hf_join) -> (STRING | hf_split) TRANSPOSED?, the keyword consumed."""
        join = self._join() if self.kinds[self.i] == "n" else ()
        source = join[0] if join else self.string()
        self.expect("->")
        split = self._split() if self.kinds[self.i] == "n" else None
        target = self.string() if split is None else split.targets[0]
        transposed = self.kinds[self.i] == "n" and self.texts[self.i] == "transposed"
        self.i += transposed
        return ast.HfWeight(source, target, transposed, span=self.span(start, self.i - 1), split=split, join=join)

    def _join(self) -> tuple[ast.Literal, ...]:
        """hf_join: "join" ( STRING (, STRING)+ ,? )"""
        self.keyword("join")
        self.expect("(")
        sources = tuple(self.comma_list(self.string, ")"))
        if len(sources) < 2:
            raise Defer  # Lark reports a join of one part
        return sources

    def _split(self) -> ast.HfSplit:
        """hf_split: "split" ( STRING (, STRING)+ ,? ) "by" dims ("interleaved" dim)?"""
        start = self.keyword("split")
        self.expect("(")
        targets = tuple(self.comma_list(self.string, ")"))
        if len(targets) < 2:
            raise Defer  # Lark reports a split of one part
        self.keyword("by")
        self.expect("(")
        sizes = tuple(self.comma_list(self.dim, ")"))
        groups = None
        if self.kinds[self.i] == "n" and self.texts[self.i] == "interleaved":
            self.i += 1
            groups = self.dim()
        return ast.HfSplit(targets, sizes, groups, span=self.span(start, self.i - 1))

    def _default(self, start: int) -> ast.HfDefault:
        """hf_default: "default" hf_key (= literal | "unset"), the keyword consumed."""
        key = self.key()
        if self.kinds[self.i] == "=":
            self.i += 1
            value = self.literal()
            return ast.HfDefault(key, value, span=self.span(start, self.i - 1))
        self.keyword("unset")
        return ast.HfDefault(key, None, span=self.span(start, self.i - 1))

    def ignored(self) -> ast.HfIgnored:
        """hf_ignored: hf_key (= literal)? | STRING"""
        start = self.i
        if self.kinds[start] == "s":
            return ast.HfIgnored(self.string(), span=self.span(start, start))
        if self.word() == "unset":
            raise Defer  # after a key Lark reads it as hf_default's keyword (their LALR state is shared)
        key = self.key()
        if self.kinds[self.i] != "=":
            return ast.HfIgnored(key, span=self.span(start, self.i - 1))
        self.i += 1
        value = self.literal()
        return ast.HfIgnored(key, value, span=self.span(start, self.i - 1))

    def key(self) -> ast.Name:
        """hf_key: NAME (. NAME)*"""
        start = self.i
        parts = [self.name().value]
        while self.kinds[self.i] == "." and self.kinds[self.i + 1] == "n":
            self.i += 1
            parts.append(self.name().value)
        return ast.Name(".".join(parts), span=self.span(start, self.i - 1))

    def symbol(self) -> ast.HfSymbol:
        """hf_symbol: STRING -> NAME"""
        start = self.i
        symbol = self.string()
        self.expect("->")
        kind = self.name()
        return ast.HfSymbol(symbol, kind, span=self.span(start, self.i - 1))
