"""The AST: one frozen attrs class per grammar rule, each carrying its Span.

Spans are excluded from equality, so two files that say the same thing in a
different layout have equal ASTs: `parse(fmt(ast)) == ast` is a property test.
Statements keep source order inside their blocks; the checks, not this module,
decide what a block may hold.

The nodes live in one module per concern, each importing only those before it:
leaves, vocabulary, conditions, layouts, fields, import_rules, profiles,
families, models, devices, files. This package re-exports every public name,
so `from hpdsl import ast` and `ast.Name` read as they always have.
"""

from hpdsl.ast.leaves import Comment, Literal, LiteralKind, Name
from hpdsl.ast.vocabulary import ImportDecl, OpDecl, SlotBinding, SlotsBlock, Vocabulary
from hpdsl.ast.conditions import AllOf, AnyOf, Comparison, Constant, Expr, Implies, Membership, Negation, Reference
from hpdsl.ast.layouts import (
    CostBlock, CostTerm, DimExpr, DimProduct, DimSum, Layout, LayoutEntry, ParamPath, Placement, dim_names,
)
from hpdsl.ast.fields import (
    BoolType, EnumType, FieldBound, FieldDecl, FieldType, IntType, ScalarKind, ScalarType, SelectorType,
)
from hpdsl.ast.import_rules import (
    HfDefault, HfDerive, HfIgnore, HfIgnored, HfMap, HfPattern, HfRead, HfRule, HfSplit, HfSymbol, HfValue, HfWeight,
    ImportRules,
)
from hpdsl.ast.profiles import (
    AttentionFlavour, DefaultKind, FfnFlavour, Kind, KindDim, KindDims, KindItem, KindWiring, ModelTypes,
    OpCount, OpsBlock, Profile, ProfileItem, Setting, SettingsBlock, SettingsBlockKind,
)
from hpdsl.ast.families import Factory, Family, FamilyItem, ParallelAxis, Require, Selector, Variant
from hpdsl.ast.models import Block, Choice, Field, LayerTypes, Model, ModelItem, Stack, StackKind, StackList
from hpdsl.ast.devices import Cluster, ClusterItem, Curve, CurvePoint, Device, DeviceItem, Tier
from hpdsl.ast.files import Declaration, File

__all__ = [
    "AllOf", "AnyOf", "AttentionFlavour", "Block", "BoolType", "Choice", "Cluster", "ClusterItem", "Comment",
    "Comparison", "Constant", "CostBlock", "CostTerm", "Curve", "CurvePoint", "Declaration", "DefaultKind",
    "Device", "DeviceItem", "DimExpr", "DimProduct", "DimSum", "EnumType", "Expr", "Factory", "Family",
    "FamilyItem", "FfnFlavour", "Field", "FieldBound", "FieldDecl", "FieldType", "File", "HfDefault",
    "HfDerive", "HfIgnore", "HfIgnored", "HfMap", "HfPattern", "HfRead", "HfRule", "HfSplit", "HfSymbol", "HfValue",
    "HfWeight", "Implies", "ImportDecl", "ImportRules", "IntType", "Kind", "KindDim", "KindDims", "KindItem",
    "KindWiring", "LayerTypes", "Layout", "LayoutEntry", "Literal", "LiteralKind", "Membership", "Model",
    "ModelItem", "ModelTypes", "Name", "Negation", "OpCount", "OpDecl", "OpsBlock", "ParallelAxis",
    "ParamPath", "Placement", "Profile", "ProfileItem", "Reference", "Require", "ScalarKind", "ScalarType",
    "Selector", "SelectorType", "Setting", "SettingsBlock", "SettingsBlockKind", "SlotBinding", "SlotsBlock",
    "Stack", "StackKind", "StackList", "Tier", "Variant", "Vocabulary", "dim_names",
]
