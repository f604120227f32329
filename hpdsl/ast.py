"""The AST: one frozen attrs class per grammar rule, each carrying its Span.

Spans are excluded from equality, so two files that say the same thing in a
different layout have equal ASTs: `parse(fmt(ast)) == ast` is a property test.
Statements keep source order inside their blocks; the checks, not this module,
decide what a block may hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal as TypingLiteral
from typing import Union

import attrs

from hpdsl.diagnostics.span import NO_SPAN, Span


def _span() -> Span:
    return attrs.field(default=NO_SPAN, eq=False, repr=False, kw_only=True)


# --------------------------------------------------------------------------
# Leaves
# --------------------------------------------------------------------------

LiteralKind = TypingLiteral["int", "float", "bool", "string"]


@attrs.frozen
class Name:
    """An identifier: a declaration's name or a reference to one."""

    value: str
    span: Span = _span()


@attrs.frozen
class Literal:
    """A literal value; `kind` keeps `true` and `1` apart (Python says True == 1)."""

    value: int | float | bool | str
    kind: LiteralKind
    span: Span = _span()


@attrs.frozen
class Comment:
    """A source comment, kept so `hpdsl fmt` can write it back."""

    text: str
    span: Span = _span()


# --------------------------------------------------------------------------
# Files and the op vocabulary
# --------------------------------------------------------------------------


@attrs.frozen
class ImportDecl:
    """`import "path.hpf"`."""

    path: Literal
    span: Span = _span()


@attrs.frozen
class OpDecl:
    """One op of the vocabulary and its one-line meaning."""

    name: Name
    meaning: Literal
    span: Span = _span()


@attrs.frozen
class Vocabulary:
    """`vocabulary { ... }`: the op names every vector is checked against, in order."""

    ops: tuple[OpDecl, ...]
    span: Span = _span()


# --------------------------------------------------------------------------
# Slot bindings
# --------------------------------------------------------------------------


@attrs.frozen
class SlotBinding:
    """`mlp gated_mlp` inside a slots block: a slot and the family that fills it."""

    slot: Name
    family: Name
    span: Span = _span()


@attrs.frozen
class SlotsBlock:
    """`slots { ... }`: at top level the defaults, in a profile or kind its overrides."""

    bindings: tuple[SlotBinding, ...]
    span: Span = _span()


# --------------------------------------------------------------------------
# Profiles
# --------------------------------------------------------------------------


@attrs.frozen
class Setting:
    """`key = value` inside run, model and facts blocks."""

    key: Name
    value: Literal
    span: Span = _span()


@attrs.frozen
class OpCount:
    """`attMM 4` inside an ops block."""

    op: Name
    count: Literal
    span: Span = _span()


@attrs.frozen
class OpsBlock:
    """`ops { ... }`: a complete vector, or the overrides of an inherited one."""

    counts: tuple[OpCount, ...]
    span: Span = _span()


@attrs.frozen
class AttentionFlavour:
    """`attention full|linear`."""

    value: Name
    span: Span = _span()


@attrs.frozen
class FfnFlavour:
    """`ffn dense|moe`."""

    value: Name
    span: Span = _span()


@attrs.frozen
class KindWiring:
    """`wiring pre_norm|sandwich|sublayer_post_norm|post_norm|parallel|parallel_two_norms`."""

    value: Name
    span: Span = _span()


@attrs.frozen
class KindDim:
    """`FIELD = DIMS` inside a kind's `dims { }`: the field's value in the kind's layers."""

    field: Name
    value: DimExpr
    span: Span = _span()


@attrs.frozen
class KindDims:
    """`dims { FIELD = DIMS ... }`: a kind's own head shapes, over the model's fields."""

    entries: tuple[KindDim, ...]
    span: Span = _span()


KindItem = Union[OpsBlock, AttentionFlavour, FfnFlavour, KindWiring, SlotsBlock, KindDims]


@attrs.frozen
class Kind:
    """`kind NAME [from BASE] { ... }`: one layer kind of a profile."""

    name: Name
    base: Name | None
    items: tuple[KindItem, ...]
    span: Span = _span()


@attrs.frozen
class DefaultKind:
    """`default KIND`."""

    kind: Name
    span: Span = _span()


@attrs.frozen
class ModelTypes:
    """`model_types "llama" "mistral"`: the HuggingFace model_types the profile prices."""

    types: tuple[Literal, ...]
    span: Span = _span()


SettingsBlockKind = TypingLiteral["run", "model", "facts"]


@attrs.frozen
class SettingsBlock:
    """`run { ... }`, `model { ... }` or `facts ["model_type" ...] { ... }` inside a profile.

    `types` (facts only) names the HuggingFace model_types the facts hold for;
    empty means every model_type the profile prices.
    """

    block: SettingsBlockKind
    settings: tuple[Setting, ...]
    types: tuple[Literal, ...] = ()
    span: Span = _span()


@attrs.frozen
class HfDefault:
    """`default KEY = VALUE` (or `default KEY unset`): what transformers uses for an absent key."""

    key: Name
    value: Literal | None  # None: `unset`, transformers' None
    span: Span = _span()


@attrs.frozen
class HfMap:
    """`map KEY -> FIELD` or `map KEY -> BLOCK.FIELD`: a config key read into a model field."""

    key: Name
    field: Name
    block: Name | None = None
    span: Span = _span()


@attrs.frozen
class HfRead:
    """`read KEY ...`: config keys a built-in import rule reads (hpdsl/importers/rules.py)."""

    keys: tuple[Name, ...]
    span: Span = _span()


@attrs.frozen
class HfIgnored:
    """One entry of an ignore block: a key, `key = value` (harmless only there) or a "glob" (`key` a string)."""

    key: Name | Literal
    value: Literal | None = None
    span: Span = _span()


@attrs.frozen
class HfIgnore:
    """`ignore "why" { ... }`: config keys irrelevant to cost and structure, with the reason.

    `unmodelled "construct" { ... }` (unmodelled true): keys that mean a construct hpdsl does
    not build, harmless only at null or their stated value; `reason` names the construct.
    """

    reason: Literal
    keys: tuple[HfIgnored, ...]
    span: Span = _span()
    unmodelled: bool = False


@attrs.frozen
class HfSymbol:
    """`"M" -> linear_attention` in a pattern block."""

    symbol: Literal
    kind: Name
    span: Span = _span()


@attrs.frozen
class HfPattern:
    """`pattern KEY { "c" -> kind ... }`: a string key whose characters name each layer's kind."""

    key: Name
    symbols: tuple[HfSymbol, ...]
    span: Span = _span()


@attrs.frozen
class HfDerive:
    """`derive FIELD = DIMS`: a model field the config leaves unset, from the fields it states."""

    field: Name
    value: DimExpr
    span: Span = _span()


@attrs.frozen
class HfSplit:
    """`split("a.", "b.", ...) by (DIMS, ...) [interleaved DIM]`: a fused tensor's rows, part by part."""

    targets: tuple[Literal, ...]
    sizes: tuple[DimExpr, ...]
    groups: DimExpr | None = None
    span: Span = _span()


@attrs.frozen
class HfWeight:
    """`weight "hf.name" -> "our.name" [transposed]`: a transformers state-dict name (or prefix) → the built model's.

    With `split`, the tensor is cut by rows into the split's targets; `target` is its first (what a
    diagnostic about the rule's target points at).
    """

    source: Literal
    target: Literal
    transposed: bool = False
    span: Span = _span()
    split: HfSplit | None = None

    @property
    def targets(self) -> tuple[Literal, ...]:
        """Return every built-model name the rule writes: the split's parts, else its one target."""
        return self.split.targets if self.split is not None else (self.target,)


HfRule = Union[HfDefault, HfMap, HfRead, HfIgnore, HfPattern, HfDerive, HfWeight]


@attrs.frozen
class ImportRules:
    """`hf ["model_type" ...] { ... }`: how configs of these model_types import ("*": every config)."""

    types: tuple[Literal, ...]
    rules: tuple[HfRule, ...]
    span: Span = _span()


ProfileItem = Union[Kind, DefaultKind, ModelTypes, SettingsBlock, SlotsBlock, ImportRules, "FieldDecl"]


@attrs.frozen
class Profile:
    """`profile NAME { ... }`: the layer kinds of one architecture family."""

    name: Name
    items: tuple[ProfileItem, ...]
    span: Span = _span()


# --------------------------------------------------------------------------
# Conditions
# --------------------------------------------------------------------------


@attrs.frozen
class Reference:
    """A bare name in a condition: a bool selector or `parallel`."""

    name: Name
    span: Span = _span()


@attrs.frozen
class Constant:
    """`true` or `false` in a condition."""

    value: bool
    span: Span = _span()


@attrs.frozen
class Comparison:
    """`tp > 1`, `backend == eager`."""

    left: Name
    op: str
    right: Literal | Name
    span: Span = _span()


@attrs.frozen
class Membership:
    """`ep in (1, 2)`."""

    left: Name
    values: tuple[Literal | Name, ...]
    span: Span = _span()


@attrs.frozen
class Negation:
    """`not EXPR`."""

    operand: Expr
    span: Span = _span()


@attrs.frozen
class AllOf:
    """`A and B and ...`."""

    operands: tuple[Expr, ...]
    span: Span = _span()


@attrs.frozen
class AnyOf:
    """`A or B or ...`."""

    operands: tuple[Expr, ...]
    span: Span = _span()


@attrs.frozen
class Implies:
    """`A -> B`."""

    premise: Expr
    conclusion: Expr
    span: Span = _span()


Expr = Union[Reference, Constant, Comparison, Membership, Negation, AllOf, AnyOf, Implies]


# --------------------------------------------------------------------------
# Families
# --------------------------------------------------------------------------


@attrs.frozen
class Factory:
    """`factory "package.module:Name"`: the family's public factory."""

    path: Literal
    span: Span = _span()


@attrs.frozen
class ParallelAxis:
    """`parallel ep`: the axis whose size > 1 makes the family parallel."""

    axis: Name
    span: Span = _span()


@attrs.frozen
class BoolType:
    """`bool`."""

    span: Span = _span()


@attrs.frozen
class IntType:
    """`int` or `int(lo..hi)`."""

    low: Literal | None
    high: Literal | None
    span: Span = _span()


@attrs.frozen
class EnumType:
    """`enum(a, b, c)`."""

    values: tuple[Name, ...]
    span: Span = _span()


SelectorType = Union[BoolType, IntType, EnumType]


@attrs.frozen
class Selector:
    """`selector NAME: TYPE [= DEFAULT]`."""

    name: Name
    type: SelectorType
    default: Literal | Name | None
    span: Span = _span()


@attrs.frozen
class Require:
    """`require EXPR ["message"]`: a constraint every request must meet."""

    condition: Expr
    message: Literal | None
    span: Span = _span()


@attrs.frozen
class ParamPath:
    """`q_proj.weight` or `q_proj`: a parameter, or a submodule holding parameters, of a family's module."""

    parts: tuple[Name, ...]
    span: Span = _span()

    @property
    def text(self) -> str:
        """Return the dotted path."""
        return ".".join(part.value for part in self.parts)


@attrs.frozen
class Variant:
    """`variant NAME "path" [default] [when EXPR] [accepts(a, b)] [params(p.q, r)]`."""

    name: Name
    path: Literal
    is_default: bool
    when: Expr | None
    accepts: tuple[Name, ...]
    params: tuple[ParamPath, ...] = ()
    span: Span = _span()


# --------------------------------------------------------------------------
# Tensor-parallel layouts
# --------------------------------------------------------------------------


@attrs.frozen
class DimSum:
    """`a + b + ...` in a dims expression."""

    terms: tuple[DimExpr, ...]
    span: Span = _span()


@attrs.frozen
class DimProduct:
    """`a * b / c`: the product of `factors` divided by each of `divisors`."""

    factors: tuple[DimExpr, ...]
    divisors: tuple[DimExpr, ...] = ()
    span: Span = _span()


DimExpr = Union[Literal, Name, DimSum, DimProduct]
"""A dims expression: an int literal, a config name, a sum or a product."""


def dim_names(expr: DimExpr) -> Iterator[Name]:
    """Yield every config name a dims expression reads, in source order (the checks locate each)."""
    if isinstance(expr, Name):
        yield expr
    elif isinstance(expr, DimSum):
        for term in expr.terms:
            yield from dim_names(term)
    elif isinstance(expr, DimProduct):
        for part in (*expr.factors, *expr.divisors):
            yield from dim_names(part)


@attrs.frozen
class Placement:
    """`colwise`, `rowwise`, `replicate`, or `colwise(2)` naming the split tensor dim."""

    name: Name
    dim: Literal | None = None
    span: Span = _span()


@attrs.frozen
class LayoutEntry:
    """`PATH (DIMS) PLACEMENT [by UNIT] [for a, b] [if COND]`: where one parameter lives on the tp axis."""

    path: ParamPath
    dims: tuple[DimExpr, ...]
    placement: Placement
    unit: DimExpr | None = None
    variants: tuple[Name, ...] = ()
    condition: Expr | None = None
    span: Span = _span()


@attrs.frozen
class Layout:
    """`layout { ... }`: the tensor-parallel placement of every parameter of a family's variants."""

    entries: tuple[LayoutEntry, ...]
    span: Span = _span()


@attrs.frozen
class CostTerm:
    """`UNIT NAME = EXPR [replicate] [recompute MODE] [if COND]`: one cost term of a family's module."""

    unit: Name
    name: Name
    expr: DimExpr
    replicate: bool = False
    recompute: Name | None = None
    condition: Expr | None = None
    span: Span = _span()


@attrs.frozen
class CostBlock:
    """`cost { ... }`: what a family's module computes beside its weight matmuls, term by term."""

    terms: tuple[CostTerm, ...]
    span: Span = _span()


FamilyItem = Union[Factory, ParallelAxis, Selector, Require, Variant, Layout, CostBlock, "FieldDecl"]


@attrs.frozen
class Family:
    """`family NAME { ... }`: a public factory and the rules choosing its variant."""

    name: Name
    items: tuple[FamilyItem, ...]
    span: Span = _span()


# --------------------------------------------------------------------------
# Model field declarations
# --------------------------------------------------------------------------


ScalarKind = TypingLiteral["int", "float", "string"]


@attrs.frozen
class ScalarType:
    """`int`, `float` or `string`: a field's type that is neither a flag nor an enum."""

    kind: ScalarKind
    span: Span = _span()


FieldType = Union[BoolType, ScalarType, EnumType]


@attrs.frozen
class FieldBound:
    """`>= 1` or `<= 1048576`: a bound of an int field."""

    op: str
    value: Literal
    span: Span = _span()


@attrs.frozen
class FieldDecl:
    """`field NAME: TYPE [BOUNDS] [in BLOCK] [= DEFAULT | required] [hf(KEYS)] "MEANING"`: one model field."""

    name: Name
    type: FieldType
    bounds: tuple[FieldBound, ...]
    block: Name | None
    default: Literal | Name | None
    required: bool
    hf: tuple[Name, ...]
    meaning: Literal
    span: Span = _span()


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


@attrs.frozen
class Field:
    """`hidden 2048`, or a flag alone (`shared_gate`), which means true."""

    name: Name
    value: Literal | None
    span: Span = _span()


@attrs.frozen
class Block:
    """`moe { ... }`, `linear { ... }`, `mla { ... }`."""

    name: Name
    fields: tuple[Field, ...]
    span: Span = _span()


@attrs.frozen
class Choice:
    """`norm rmsnorm`, `mlp gated`, `activation silu`."""

    key: Name
    value: Name
    span: Span = _span()


@attrs.frozen
class StackKind:
    """`full_attention` or `full_attention * 3` inside a stack."""

    kind: Name
    repeat: Literal | None
    span: Span = _span()


@attrs.frozen
class StackList:
    """`[item, item, ...]` with an optional `* N` repetition."""

    items: tuple[StackKind | StackList, ...]
    repeat: Literal | None
    span: Span = _span()


@attrs.frozen
class Stack:
    """`stack [...]`: the explicit body of the layer stack."""

    body: StackList
    span: Span = _span()


@attrs.frozen
class LayerTypes:
    """`layer_types [a, b, ...]`: one kind name per layer, as HuggingFace configs list them."""

    names: tuple[Name, ...]
    span: Span = _span()


ModelItem = Union[Field, Block, Choice, Stack, LayerTypes]


@attrs.frozen
class Model:
    """`model NAME [: PROFILE] { ... }`."""

    name: Name
    profile: Name | None
    items: tuple[ModelItem, ...]
    span: Span = _span()


# --------------------------------------------------------------------------
# Devices and clusters
# --------------------------------------------------------------------------


@attrs.frozen
class CurvePoint:
    """`4096 0.62` inside a curve: a size and the share of peak reached there."""

    size: Literal
    efficiency: Literal
    span: Span = _span()


@attrs.frozen
class Curve:
    """`curve matmul { ... }` inside a device: an efficiency over a size, by points."""

    name: Name
    points: tuple[CurvePoint, ...]
    span: Span = _span()


DeviceItem = Union[Setting, Curve]


@attrs.frozen
class Device:
    """`device NAME { ... }`: one accelerator's peaks, memory, efficiencies and links."""

    name: Name
    items: tuple[DeviceItem, ...]
    span: Span = _span()


@attrs.frozen
class Tier:
    """`tier NAME { ... }` inside a cluster: one network level's bandwidth, latency and efficiencies."""

    name: Name
    settings: tuple[Setting, ...]
    span: Span = _span()


ClusterItem = Union[Setting, Tier]


@attrs.frozen
class Cluster:
    """`cluster NAME { ... }`: devices per node and the network tiers between them."""

    name: Name
    items: tuple[ClusterItem, ...]
    span: Span = _span()


Declaration = Union[ImportDecl, Vocabulary, SlotsBlock, Profile, Family, Model, Device, Cluster, FieldDecl]


@attrs.frozen
class File:
    """One parsed .hpf file: its declarations in order and its comments."""

    path: str = attrs.field(eq=False)
    items: tuple[Declaration, ...]
    comments: tuple[Comment, ...] = ()
    span: Span = _span()
