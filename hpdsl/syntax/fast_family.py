"""The fast parser's rules for families: selectors, conditions, variants and layouts.

Part of the fast path (hpdsl/syntax/fast.py); each method mirrors one rule of
grammar/hpdsl.lark. An expression's span is its own tokens: parentheses around
it are not part of it but are part of the node that holds it.
"""

from __future__ import annotations

from typing import Any

from hpdsl import ast
from hpdsl.syntax.fast_tokens import Defer, Tokens

_NOT_PLACEMENTS = frozenset({"default", "derive", "ignore", "interleaved", "map", "pattern", "read",
                             "transposed", "unmodelled", "weight"})
"""Words Lark's contextual lexer reads as keywords after a layout's dims: the LALR state after that `)`
is shared with the import rules' (tests/syntax/test_fast_parse.py's keyword swaps found it)."""

AFTER_EXPRESSION = _NOT_PLACEMENTS | frozenset({
    "for", "recompute", "replicate", "sequence", "routed", "at", "with", "without", "accepts", "cost", "factory", "field",
    "layout", "parallel", "params",
    "require", "selector", "variant"})
"""Words Lark's contextual lexer reads as keywords at the start of an entry that follows an expression
(a `by` unit, a cost term's value, an `if` condition): its LALR state there is shared too."""

_COMPARE = frozenset({"==", "!=", "<=", ">=", "<", ">"})
_SCALARS: dict[str, ast.ScalarKind] = {"int": "int", "float": "float", "string": "string"}


class FamilyRules(Tokens):
    """The rules of `family NAME { ... }` and of the conditions and dims inside it."""

    def family_item(self) -> ast.FamilyItem:
        """_family_item: factory | parallel_axis | selector | require | variant | layout | cost_block"""
        start, word = self.i, self.word()
        self.i += 1
        if word == "factory":
            return ast.Factory(self.string(), span=self.span(start, start + 1))
        if word == "parallel":
            return ast.ParallelAxis(self.name(), span=self.span(start, start + 1))
        if word == "selector":
            return self.selector(start)
        if word == "require":
            condition = self.expr()
            message = self.string() if self.kinds[self.i] == "s" else None
            return ast.Require(condition, message, span=self.span(start, self.i - 1))
        if word == "variant":
            return self.variant(start)
        if word == "field":
            return self.field_decl(start)
        if word == "layout":
            self.expect("{")
            entries: list[ast.LayoutEntry] = []
            while self.kinds[self.i] != "}":
                self.after_entry(entries)
                entries.append(self.layout_entry())
            self.i += 1
            return ast.Layout(tuple(entries), span=self.span(start, self.i - 1))
        if word == "cost":
            self.expect("{")
            terms: list[ast.CostTerm] = []
            while self.kinds[self.i] != "}":
                self.after_entry(terms)
                terms.append(self.cost_term())
            self.i += 1
            return ast.CostBlock(tuple(terms), span=self.span(start, self.i - 1))
        raise Defer

    def selector(self, start: int) -> ast.Selector:
        """selector: "selector" NAME : _selector_type (= selector_default)?"""
        name = self.name()
        self.expect(":")
        type_ = self.selector_type()
        default: ast.Literal | ast.Name | None = None
        if self.kinds[self.i] == "=":
            self.i += 1
            default = self.literal() if self.at_literal() else self.name()
        return ast.Selector(name, type_, default, span=self.span(start, self.i - 1))

    def selector_type(self) -> ast.SelectorType:
        """_selector_type: bool_type | int_type | enum_type"""
        start, word = self.i, self.word()
        self.i += 1
        if word == "bool":
            return ast.BoolType(span=self.span(start, start))
        if word == "int":
            if self.kinds[self.i] != "(":
                return ast.IntType(None, None, span=self.span(start, start))
            self.i += 1
            low = self.int()
            self.expect("..")
            high = self.int()
            self.expect(")")
            return ast.IntType(low, high, span=self.span(start, self.i - 1))
        if word == "enum":
            self.expect("(")
            values = self.comma_list(self.name, ")")
            return ast.EnumType(tuple(values), span=self.span(start, self.i - 1))
        raise Defer

    def field_decl(self, start: int) -> ast.FieldDecl:
        """field_decl: "field" NAME : field_type field_bound* field_block? field_default? field_hf? STRING"""
        name = self.name()
        self.expect(":")
        type_ = self.field_type()
        bounds = []
        while self.kinds[self.i] in _COMPARE:
            first = self.i
            self.i += 1
            bounds.append(ast.FieldBound(self.kinds[first], self.int(), span=self.span(first, self.i - 1)))
        block = None
        if self.word() == "in":
            self.i += 1
            block = self.name()
        default: ast.Literal | ast.Name | None = None
        required = self.word() == "required"
        self.i += required
        if not required and self.kinds[self.i] == "=":
            self.i += 1
            default = self.literal() if self.at_literal() else self.name()
        keys: tuple[ast.Name, ...] = ()
        if self.word() == "hf":
            self.i += 1
            self.expect("(")
            keys = tuple(self.comma_list(self.name, ")"))
        meaning = self.string()
        return ast.FieldDecl(name, type_, tuple(bounds), block, default, required, keys, meaning,
                             span=self.span(start, self.i - 1))

    def field_type(self) -> ast.FieldType:
        """field_type: bool_type | enum_type | int | float | string"""
        start, word = self.i, self.word()
        scalar = _SCALARS.get(word)
        if scalar is not None:
            self.i += 1
            return ast.ScalarType(scalar, span=self.span(start, start))
        if word not in ("bool", "enum"):
            raise Defer
        chosen = self.selector_type()
        if isinstance(chosen, ast.IntType):  # not reached: the word is bool or enum
            raise Defer
        return chosen

    def variant(self, start: int) -> ast.Variant:
        """variant: "variant" NAME STRING default_mark? when_clause? accepts? params?"""
        name = self.name()
        path = self.string()
        is_default = self.word() == "default"
        self.i += is_default
        when = None
        if self.word() == "when":
            self.i += 1
            when = self.expr()
        accepts: tuple[ast.Name, ...] = ()
        if self.word() == "accepts":
            self.i += 1
            self.expect("(")
            accepts = tuple(self.comma_list(self.name, ")"))
        params: tuple[ast.ParamPath, ...] = ()
        if self.word() == "params":
            self.i += 1
            self.expect("(")
            params = tuple(self.comma_list(self.param_path, ")"))
        return ast.Variant(name, path, is_default, when, accepts, params,
                           span=self.span(start, self.i - 1))

    # --- conditions ------------------------------------------------------

    def expr(self) -> ast.Expr:
        """expr: or_expr (-> or_expr)?"""
        start = self.i
        self.nested()
        premise = self.or_expr()
        if self.kinds[self.i] == "->":
            self.i += 1
            conclusion = self.or_expr()
            premise = ast.Implies(premise, conclusion, span=self.span(start, self.i - 1))
        self.depth -= 1
        return premise

    def or_expr(self) -> ast.Expr:
        """or_expr: and_expr ("or" and_expr)*"""
        start = self.i
        first = self.and_expr()
        if self.word() != "or":
            return first
        operands = [first]
        while self.word() == "or":
            self.i += 1
            operands.append(self.and_expr())
        return ast.AnyOf(tuple(operands), span=self.span(start, self.i - 1))

    def and_expr(self) -> ast.Expr:
        """and_expr: not_expr ("and" not_expr)*"""
        start = self.i
        first = self.not_expr()
        if self.word() != "and":
            return first
        operands = [first]
        while self.word() == "and":
            self.i += 1
            operands.append(self.not_expr())
        return ast.AllOf(tuple(operands), span=self.span(start, self.i - 1))

    def not_expr(self) -> ast.Expr:
        """not_expr: "not" not_expr | atom"""
        start, word = self.i, self.word()
        if word == "not":
            self.i += 1
            self.nested()
            operand = self.not_expr()
            self.depth -= 1
            return ast.Negation(operand, span=self.span(start, self.i - 1))
        if word == "true" or word == "false":
            self.i += 1
            return ast.Constant(word == "true", span=self.span(start, start))
        if self.kinds[start] == "(":
            self.i += 1
            inner = self.expr()
            self.expect(")")
            return inner
        name = self.name()
        kind = self.kinds[self.i]
        if kind in _COMPARE:
            self.i += 1
            right = self.operand()
            return ast.Comparison(name, kind, right, span=self.span(start, self.i - 1))
        if self.word() == "in":
            self.i += 1
            self.expect("(")
            values = self.comma_list(self.operand, ")")
            return ast.Membership(name, tuple(values), span=self.span(start, self.i - 1))
        return ast.Reference(name, span=self.span(start, start))

    def operand(self) -> ast.Literal | ast.Name:
        """operand: literal | NAME"""
        return self.literal() if self.at_literal() else self.name()

    # --- layouts ---------------------------------------------------------

    def layout_entry(self) -> ast.LayoutEntry:
        """layout_entry: param_path dims placement shard_unit? variant_scope? entry_condition?"""
        start = self.i
        path = self.param_path()
        self.expect("(")
        dims = tuple(self.comma_list(self.dim, ")"))
        place = self.i
        if self.word() in _NOT_PLACEMENTS:
            raise Defer
        name = self.name()
        dim = None
        if self.kinds[self.i] == "(":
            self.i += 1
            dim = self.int()
            self.expect(")")
        placement = ast.Placement(name, dim, span=self.span(place, self.i - 1))
        unit = None
        if self.word() == "by":
            self.i += 1
            unit = self.dim()
        variants: tuple[ast.Name, ...] = ()
        if self.word() == "for":
            self.i += 1
            names = [self.name()]
            while self.kinds[self.i] == ",":
                self.i += 1
                names.append(self.name())
            variants = tuple(names)
        condition = None
        if self.word() == "if":
            self.i += 1
            condition = self.expr()
        return ast.LayoutEntry(path, dims, placement, unit, variants, condition,
                               span=self.span(start, self.i - 1))

    def after_entry(self, before: list[Any]) -> None:
        """Defer where a layout entry or cost term starts with a word Lark may read as a keyword there."""
        if before and self.word() in AFTER_EXPRESSION:
            raise Defer

    def cost_term(self) -> ast.CostTerm:
        """cost_term: NAME NAME = dim (replicate|sequence|routed)? cost_bytes? cost_recompute? cost_flash? entry_condition?"""
        start = self.i
        unit, name = self.name(), self.name()
        self.expect("=")
        expr = self.dim()
        replicate = self.word() == "replicate"
        sequence = not replicate and self.word() == "sequence"
        routed = not (replicate or sequence) and self.word() == "routed"
        self.i += replicate or sequence or routed
        kept = None
        if self.word() == "at":
            self.i += 1
            kept = self.name()
        recompute = None
        if self.word() == "recompute":
            self.i += 1
            recompute = self.name()
        flash = None
        if self.word() in ("with", "without"):
            flash = self.name()
            self.keyword("flash")
        condition = None
        if self.word() == "if":
            self.i += 1
            condition = self.expr()
        return ast.CostTerm(unit, name, expr, replicate, recompute, condition, span=self.span(start, self.i - 1),
                            sequence=sequence, bytes=kept, flash=flash, routed=routed)

    def param_path(self) -> ast.ParamPath:
        """param_path: NAME (. NAME)*"""
        start = self.i
        parts = [self.name()]
        while self.kinds[self.i] == ".":
            self.i += 1
            parts.append(self.name())
        return ast.ParamPath(tuple(parts), span=self.span(start, self.i - 1))

    def dim(self) -> ast.DimExpr:
        """dim: dim_term (+ dim_term)*"""
        start = self.i
        self.nested()
        first = self.dim_term()
        if self.kinds[self.i] == "+":
            terms = [first]
            while self.kinds[self.i] == "+":
                self.i += 1
                terms.append(self.dim_term())
            first = ast.DimSum(tuple(terms), span=self.span(start, self.i - 1))
        self.depth -= 1
        return first

    def dim_term(self) -> ast.DimExpr:
        """dim_term: dim_atom (* dim_atom | / dim_atom)*"""
        start = self.i
        first = self.dim_atom()
        if self.kinds[self.i] not in ("*", "/"):
            return first
        factors: list[ast.DimExpr] = [first]
        divisors: list[ast.DimExpr] = []
        while self.kinds[self.i] in ("*", "/"):
            self.i += 1
            (factors if self.kinds[self.i - 1] == "*" else divisors).append(self.dim_atom())
        return ast.DimProduct(tuple(factors), tuple(divisors), span=self.span(start, self.i - 1))

    def dim_atom(self) -> ast.DimExpr:
        """dim_atom: INT | NAME | ( dim )"""
        kind = self.kinds[self.i]
        if kind == "i":
            return self.int()
        if kind == "(":
            self.i += 1
            inner = self.dim()
            self.expect(")")
            return inner
        return self.name()
