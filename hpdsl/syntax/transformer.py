"""Lark parse tree into the AST: one method per grammar rule, no checks.

Exceptions raised here would come out wrapped in Lark's VisitError, so this
module only builds nodes; everything that can be wrong is found in hpdsl/check/.
"""

from __future__ import annotations

from typing import Any

from lark import Token, v_args
from lark.tree import Meta

from hpdsl import ast
from hpdsl.syntax.transformer_fields import FieldDeclRules


@v_args(meta=True)
class ToAst(FieldDeclRules):
    """Builds an ast.File from the tree of one source file."""

    # --- files -----------------------------------------------------------

    def start(self, meta: Meta, items: list[Any]) -> ast.File:
        return ast.File(self.file, tuple(items), span=self._span(meta))

    def import_decl(self, meta: Meta, children: list[Token]) -> ast.ImportDecl:
        return ast.ImportDecl(self._string(children[0]), span=self._span(meta))

    def vocabulary(self, meta: Meta, children: list[ast.OpDecl]) -> ast.Vocabulary:
        return ast.Vocabulary(tuple(children), span=self._span(meta))

    def op_decl(self, meta: Meta, children: list[Token]) -> ast.OpDecl:
        name, meaning = children
        return ast.OpDecl(self._name(name), self._string(meaning), span=self._span(meta))

    # --- slot bindings ---------------------------------------------------

    def slots_block(self, meta: Meta, children: list[ast.SlotBinding]) -> ast.SlotsBlock:
        return ast.SlotsBlock(tuple(children), span=self._span(meta))

    def slot_binding(self, meta: Meta, children: list[Token]) -> ast.SlotBinding:
        slot, family = children
        return ast.SlotBinding(self._name(slot), self._name(family), span=self._span(meta))

    # --- devices and clusters ---------------------------------------------

    def device(self, meta: Meta, children: list[Any]) -> ast.Device:
        name, *items = children
        return ast.Device(self._name(name), tuple(items), span=self._span(meta))

    def curve(self, meta: Meta, children: list[Any]) -> ast.Curve:
        name, *points = children
        return ast.Curve(self._name(name), tuple(points), span=self._span(meta))

    def curve_point(self, meta: Meta, children: list[ast.Literal]) -> ast.CurvePoint:
        size, efficiency = children
        return ast.CurvePoint(size, efficiency, span=self._span(meta))

    def cluster(self, meta: Meta, children: list[Any]) -> ast.Cluster:
        name, *items = children
        return ast.Cluster(self._name(name), tuple(items), span=self._span(meta))

    def tier(self, meta: Meta, children: list[Any]) -> ast.Tier:
        name, *settings = children
        return ast.Tier(self._name(name), tuple(settings), span=self._span(meta))

    # --- literals --------------------------------------------------------

    def int_literal(self, meta: Meta, children: list[Token]) -> ast.Literal:
        return self._int(children[0])

    def float_literal(self, meta: Meta, children: list[Token]) -> ast.Literal:
        return self._literal(children[0], "float", float(children[0]))

    def bool_literal(self, meta: Meta, children: list[Token]) -> ast.Literal:
        return self._literal(children[0], "bool", children[0].type == "TRUE")

    def string_literal(self, meta: Meta, children: list[Token]) -> ast.Literal:
        return self._string(children[0])

    # --- profiles --------------------------------------------------------

    def profile(self, meta: Meta, children: list[Any]) -> ast.Profile:
        name, *items = children
        return ast.Profile(self._name(name), tuple(items), span=self._span(meta))

    def default_kind(self, meta: Meta, children: list[Token]) -> ast.DefaultKind:
        return ast.DefaultKind(self._name(children[0]), span=self._span(meta))

    def model_types(self, meta: Meta, children: list[Token]) -> ast.ModelTypes:
        return ast.ModelTypes(tuple(self._string(t) for t in children), span=self._span(meta))

    def _settings(self, block: ast.SettingsBlockKind, meta: Meta, children: list[Any]) -> ast.SettingsBlock:
        types = tuple(self._string(c) for c in children if isinstance(c, Token))
        settings = tuple(c for c in children if isinstance(c, ast.Setting))
        return ast.SettingsBlock(block, settings, types, span=self._span(meta))

    def run_block(self, meta: Meta, children: list[ast.Setting]) -> ast.SettingsBlock:
        return self._settings("run", meta, children)

    def model_block(self, meta: Meta, children: list[ast.Setting]) -> ast.SettingsBlock:
        return self._settings("model", meta, children)

    def facts_block(self, meta: Meta, children: list[ast.Setting]) -> ast.SettingsBlock:
        return self._settings("facts", meta, children)

    def setting(self, meta: Meta, children: list[Any]) -> ast.Setting:
        key, value = children
        return ast.Setting(self._name(key), value, span=self._span(meta))

    # --- import rules ----------------------------------------------------

    def import_rules(self, meta: Meta, children: list[Any]) -> ast.ImportRules:
        types = tuple(self._string(c) for c in children if isinstance(c, Token))
        rules = tuple(c for c in children if not isinstance(c, Token))
        return ast.ImportRules(types, rules, span=self._span(meta))

    def hf_default(self, meta: Meta, children: list[Any]) -> ast.HfDefault:
        key, value = children
        literal = None if isinstance(value, Token) else value  # the UNSET keyword
        return ast.HfDefault(key, literal, span=self._span(meta))

    def hf_key(self, meta: Meta, children: list[Token]) -> ast.Name:
        return ast.Name(".".join(str(token) for token in children), span=self._span(meta))

    def hf_map(self, meta: Meta, children: list[Any]) -> ast.HfMap:
        key, *target = children
        values: tuple[ast.HfValue, ...] = target.pop() if isinstance(target[-1], tuple) else ()
        if len(target) == 1:
            return ast.HfMap(key, self._name(target[0]), span=self._span(meta), values=values)
        return ast.HfMap(key, self._name(target[1]), self._name(target[0]), span=self._span(meta), values=values)

    def hf_values(self, meta: Meta, children: list[ast.HfValue]) -> tuple[ast.HfValue, ...]:
        return tuple(children)

    def hf_value(self, meta: Meta, children: list[Any]) -> ast.HfValue:
        stated, value = children
        return ast.HfValue(stated, self._name(value) if isinstance(value, Token) else value, span=self._span(meta))

    def hf_read(self, meta: Meta, children: list[Token]) -> ast.HfRead:
        return ast.HfRead(tuple(self._name(t) for t in children), span=self._span(meta))

    def hf_ignore(self, meta: Meta, children: list[Any]) -> ast.HfIgnore:
        reason, *keys = children
        return ast.HfIgnore(self._string(reason), tuple(keys), span=self._span(meta))

    def hf_unmodelled(self, meta: Meta, children: list[Any]) -> ast.HfIgnore:
        reason, *keys = children
        return ast.HfIgnore(self._string(reason), tuple(keys), span=self._span(meta), unmodelled=True)

    def hf_ignored(self, meta: Meta, children: list[Any]) -> ast.HfIgnored:
        key, *value = children
        return ast.HfIgnored(key, value[0] if value else None, span=self._span(meta))

    def hf_ignored_glob(self, meta: Meta, children: list[Token]) -> ast.HfIgnored:
        return ast.HfIgnored(self._string(children[0]), span=self._span(meta))

    def hf_pattern(self, meta: Meta, children: list[Any]) -> ast.HfPattern:
        key, *symbols = children
        return ast.HfPattern(self._name(key), tuple(symbols), span=self._span(meta))

    def hf_symbol(self, meta: Meta, children: list[Token]) -> ast.HfSymbol:
        symbol, kind = children
        return ast.HfSymbol(self._string(symbol), self._name(kind), span=self._span(meta))

    def hf_derive(self, meta: Meta, children: list[Any]) -> ast.HfDerive:
        field, value = children
        return ast.HfDerive(self._name(field), value, span=self._span(meta))

    def hf_weight(self, meta: Meta, children: list[Any]) -> ast.HfWeight:
        source, target, *flag = children
        join: tuple[ast.Literal, ...] = source if isinstance(source, tuple) else ()
        first = join[0] if join else self._string(source)
        if isinstance(target, ast.HfSplit):
            return ast.HfWeight(first, target.targets[0], bool(flag), span=self._span(meta), split=target, join=join)
        return ast.HfWeight(first, self._string(target), bool(flag), span=self._span(meta), join=join)

    def hf_join(self, meta: Meta, children: list[Token]) -> tuple[ast.Literal, ...]:
        return tuple(self._string(child) for child in children)

    def hf_split(self, meta: Meta, children: list[Any]) -> ast.HfSplit:
        targets = tuple(self._string(child) for child in children if isinstance(child, Token))
        sizes = next(child for child in children if isinstance(child, tuple))
        groups = next((child.expr for child in children if isinstance(child, _Unit)), None)
        return ast.HfSplit(targets, sizes, groups, span=self._span(meta))

    def hf_interleave(self, meta: Meta, children: list[Any]) -> _Unit:
        return _Unit(children[0])

    def kind(self, meta: Meta, children: list[Any]) -> ast.Kind:
        name, *rest = children
        base = rest.pop(0) if rest and isinstance(rest[0], ast.Name) else None
        return ast.Kind(self._name(name), base, tuple(rest), span=self._span(meta))

    def kind_base(self, meta: Meta, children: list[Token]) -> ast.Name:
        return self._name(children[0])

    def attention_flavour(self, meta: Meta, children: list[Token]) -> ast.AttentionFlavour:
        return ast.AttentionFlavour(self._name(children[0]), span=self._span(meta))

    def ffn_flavour(self, meta: Meta, children: list[Token]) -> ast.FfnFlavour:
        return ast.FfnFlavour(self._name(children[0]), span=self._span(meta))

    def kind_wiring(self, meta: Meta, children: list[Token]) -> ast.KindWiring:
        return ast.KindWiring(self._name(children[1]), span=self._span(meta))

    def kind_dims(self, meta: Meta, children: list[ast.KindDim]) -> ast.KindDims:
        return ast.KindDims(tuple(children), span=self._span(meta))

    def kind_dim(self, meta: Meta, children: list[Any]) -> ast.KindDim:
        field, value = children
        return ast.KindDim(self._name(field), value, span=self._span(meta))

    def ops_block(self, meta: Meta, children: list[ast.OpCount]) -> ast.OpsBlock:
        return ast.OpsBlock(tuple(children), span=self._span(meta))

    def op_count(self, meta: Meta, children: list[Any]) -> ast.OpCount:
        op, count = children
        return ast.OpCount(self._name(op), count, span=self._span(meta))

    # --- families --------------------------------------------------------

    def family(self, meta: Meta, children: list[Any]) -> ast.Family:
        name, *items = children
        return ast.Family(self._name(name), tuple(items), span=self._span(meta))

    def factory(self, meta: Meta, children: list[Token]) -> ast.Factory:
        return ast.Factory(self._string(children[0]), span=self._span(meta))

    def parallel_axis(self, meta: Meta, children: list[Token]) -> ast.ParallelAxis:
        return ast.ParallelAxis(self._name(children[0]), span=self._span(meta))

    def selector(self, meta: Meta, children: list[Any]) -> ast.Selector:
        name, type_, *default = children
        return ast.Selector(self._name(name), type_, default[0] if default else None,
                            span=self._span(meta))

    def bool_type(self, meta: Meta, children: list[Token]) -> ast.BoolType:
        return ast.BoolType(span=self._span(meta))

    def int_type(self, meta: Meta, children: list[Token]) -> ast.IntType:
        if not children:
            return ast.IntType(None, None, span=self._span(meta))
        low, high = children
        return ast.IntType(self._int(low), self._int(high), span=self._span(meta))

    def enum_type(self, meta: Meta, children: list[Token]) -> ast.EnumType:
        return ast.EnumType(tuple(self._name(t) for t in children), span=self._span(meta))

    def selector_default(self, meta: Meta, children: list[ast.Literal]) -> ast.Literal:
        return children[0]

    def selector_default_name(self, meta: Meta, children: list[Token]) -> ast.Name:
        return self._name(children[0])

    def require(self, meta: Meta, children: list[Any]) -> ast.Require:
        condition, *message = children
        text = self._string(message[0]) if message else None
        return ast.Require(condition, text, span=self._span(meta))

    def variant(self, meta: Meta, children: list[Any]) -> ast.Variant:
        name, path, *rest = children
        is_default = any(part == "default" for part in rest if isinstance(part, str))
        when = next((part for part in rest if isinstance(part, _When)), None)
        accepts = next((part for part in rest if isinstance(part, tuple)), ())
        params = next((part.paths for part in rest if isinstance(part, _Params)), ())
        return ast.Variant(self._name(name), self._string(path), is_default,
                           when.expr if when else None, accepts, params, span=self._span(meta))

    def default_mark(self, meta: Meta, children: list[Token]) -> str:
        return "default"

    def when_clause(self, meta: Meta, children: list[Any]) -> _When:
        return _When(children[0])

    def accepts(self, meta: Meta, children: list[Token]) -> tuple[ast.Name, ...]:
        return tuple(self._name(t) for t in children)

    def params(self, meta: Meta, children: list[ast.ParamPath]) -> _Params:
        return _Params(tuple(children))

    # --- layouts ---------------------------------------------------------

    def layout(self, meta: Meta, children: list[ast.LayoutEntry]) -> ast.Layout:
        return ast.Layout(tuple(children), span=self._span(meta))

    def layout_entry(self, meta: Meta, children: list[Any]) -> ast.LayoutEntry:
        path, dims, placement, *rest = children
        unit = next((part.expr for part in rest if isinstance(part, _Unit)), None)
        variants = next((part for part in rest if isinstance(part, tuple)), ())
        condition = next((part.expr for part in rest if isinstance(part, _When)), None)
        return ast.LayoutEntry(path, dims, placement, unit, variants, condition, span=self._span(meta))

    def cost_block(self, meta: Meta, children: list[ast.CostTerm]) -> ast.CostBlock:
        return ast.CostBlock(tuple(children), span=self._span(meta))

    def cost_term(self, meta: Meta, children: list[Any]) -> ast.CostTerm:
        unit, name, expr, *rest = children
        recompute = next((part.name for part in rest if isinstance(part, _Recompute)), None)
        condition = next((part.expr for part in rest if isinstance(part, _When)), None)
        kept = next((part.name for part in rest if isinstance(part, _Bytes)), None)
        flash = next((part.name for part in rest if isinstance(part, _Flash)), None)
        return ast.CostTerm(self._name(unit), self._name(name), expr, any(part is _REPLICATE for part in rest),
                            recompute, condition, span=self._span(meta),
                            sequence=any(part is _SEQUENCE for part in rest), bytes=kept, flash=flash,
                            routed=any(part is _ROUTED for part in rest))

    def cost_replicate(self, meta: Meta, children: list[Token]) -> object:
        return _REPLICATE

    def cost_sequence(self, meta: Meta, children: list[Token]) -> object:
        return _SEQUENCE

    def cost_routed(self, meta: Meta, children: list[Token]) -> object:
        return _ROUTED

    def cost_bytes(self, meta: Meta, children: list[Token]) -> _Bytes:
        return _Bytes(self._name(children[0]))

    def cost_flash(self, meta: Meta, children: list[Token]) -> _Flash:
        return _Flash(self._name(children[0]))

    def cost_recompute(self, meta: Meta, children: list[Token]) -> _Recompute:
        return _Recompute(self._name(children[0]))

    def param_path(self, meta: Meta, children: list[Token]) -> ast.ParamPath:
        return ast.ParamPath(tuple(self._name(t) for t in children), span=self._span(meta))

    def dims(self, meta: Meta, children: list[Any]) -> tuple[Any, ...]:
        return tuple(children)

    def placement(self, meta: Meta, children: list[Token]) -> ast.Placement:
        name, *dim = children
        return ast.Placement(self._name(name), self._int(dim[0]) if dim else None, span=self._span(meta))

    def shard_unit(self, meta: Meta, children: list[Any]) -> _Unit:
        return _Unit(children[0])

    def variant_scope(self, meta: Meta, children: list[Token]) -> tuple[ast.Name, ...]:
        return tuple(self._name(t) for t in children)

    def entry_condition(self, meta: Meta, children: list[Any]) -> _When:
        return _When(children[0])

    def dim_sum(self, meta: Meta, children: list[Any]) -> ast.DimSum:
        return ast.DimSum(tuple(children), span=self._span(meta))

    def dim_product(self, meta: Meta, children: list[Any]) -> ast.DimProduct:
        factors = tuple(c for c in children if not isinstance(c, _Divisor))
        divisors = tuple(c.expr for c in children if isinstance(c, _Divisor))
        return ast.DimProduct(factors, divisors, span=self._span(meta))

    def dim_divisor(self, meta: Meta, children: list[Any]) -> _Divisor:
        return _Divisor(children[0])

    def dim_int(self, meta: Meta, children: list[Token]) -> ast.Literal:
        return self._int(children[0])

    def dim_name(self, meta: Meta, children: list[Token]) -> ast.Name:
        return self._name(children[0])

    # --- conditions ------------------------------------------------------

    def implies(self, meta: Meta, children: list[Any]) -> ast.Implies:
        premise, conclusion = children
        return ast.Implies(premise, conclusion, span=self._span(meta))

    def any_of(self, meta: Meta, children: list[Any]) -> ast.AnyOf:
        return ast.AnyOf(tuple(children), span=self._span(meta))

    def all_of(self, meta: Meta, children: list[Any]) -> ast.AllOf:
        return ast.AllOf(tuple(children), span=self._span(meta))

    def negation(self, meta: Meta, children: list[Any]) -> ast.Negation:
        return ast.Negation(children[0], span=self._span(meta))

    def reference(self, meta: Meta, children: list[Token]) -> ast.Reference:
        return ast.Reference(self._name(children[0]), span=self._span(meta))

    def constant(self, meta: Meta, children: list[Token]) -> ast.Constant:
        return ast.Constant(children[0].type == "TRUE", span=self._span(meta))

    def comparison(self, meta: Meta, children: list[Any]) -> ast.Comparison:
        left, op, right = children
        return ast.Comparison(self._name(left), str(op), right, span=self._span(meta))

    def membership(self, meta: Meta, children: list[Any]) -> ast.Membership:
        left, *values = children
        return ast.Membership(self._name(left), tuple(values), span=self._span(meta))

    def operand_name(self, meta: Meta, children: list[Token]) -> ast.Name:
        return self._name(children[0])

    # --- models ----------------------------------------------------------

    def model(self, meta: Meta, children: list[Any]) -> ast.Model:
        name, *rest = children
        profile = self._name(rest.pop(0)) if rest and isinstance(rest[0], Token) else None
        return ast.Model(self._name(name), profile, tuple(rest), span=self._span(meta))

    def field(self, meta: Meta, children: list[Any]) -> ast.Field:
        name, *value = children
        return ast.Field(self._name(name), value[0] if value else None, span=self._span(meta))

    def block(self, meta: Meta, children: list[Any]) -> ast.Block:
        name, *fields = children
        return ast.Block(self._name(name), tuple(fields), span=self._span(meta))

    def choice(self, meta: Meta, children: list[Token]) -> ast.Choice:
        key, value = children
        return ast.Choice(self._name(key), self._name(value), span=self._span(meta))

    def stack(self, meta: Meta, children: list[ast.StackList]) -> ast.Stack:
        return ast.Stack(children[0], span=self._span(meta))

    def stack_list(self, meta: Meta, children: list[Any]) -> ast.StackList:
        repeat = children.pop() if children and isinstance(children[-1], ast.Literal) else None
        return ast.StackList(tuple(children), repeat, span=self._span(meta))

    def stack_kind(self, meta: Meta, children: list[Any]) -> ast.StackKind:
        name, *repeat = children
        return ast.StackKind(self._name(name), repeat[0] if repeat else None, span=self._span(meta))

    def repeat(self, meta: Meta, children: list[Token]) -> ast.Literal:
        return self._int(children[0])

    def layer_types(self, meta: Meta, children: list[Token]) -> ast.LayerTypes:
        return ast.LayerTypes(tuple(self._name(t) for t in children), span=self._span(meta))


class _When:
    """Marks a `when` clause among a variant's optional parts (a layout entry's `if` alike)."""

    def __init__(self, expr: Any) -> None:
        self.expr = expr


class _Params:
    """Marks a `params(...)` list among a variant's optional parts (accepts is a plain tuple)."""

    def __init__(self, paths: tuple[ast.ParamPath, ...]) -> None:
        self.paths = paths


class _Unit:
    """Marks a `by UNIT` clause among a layout entry's optional parts."""

    def __init__(self, expr: Any) -> None:
        self.expr = expr


class _Recompute:
    """Marks a cost term's `recompute MODE` among its optional parts."""

    def __init__(self, name: ast.Name) -> None:
        self.name = name


_REPLICATE = object()
"""Marks a cost term's `replicate` among its optional parts."""

_SEQUENCE = object()
"""Marks a cost term's `sequence` among its optional parts."""

_ROUTED = object()
"""Marks a cost term's `routed` among its optional parts."""


class _Bytes:
    """Marks a cost term's `at BYTES` among its optional parts."""

    def __init__(self, name: ast.Name) -> None:
        self.name = name


class _Flash:
    """Marks a cost term's `with flash` or `without flash` (the word before `flash`) among its optional parts."""

    def __init__(self, name: ast.Name) -> None:
        self.name = name


class _Divisor:
    """Marks an operand after `/` inside a product."""

    def __init__(self, expr: Any) -> None:
        self.expr = expr
