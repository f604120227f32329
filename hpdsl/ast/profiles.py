"""Profiles: layer kinds, their ops, flavours and dims, settings blocks and the profile node."""

from __future__ import annotations

from typing import Literal as TypingLiteral
from typing import Union

import attrs

from hpdsl.ast.fields import FieldDecl
from hpdsl.ast.import_rules import ImportRules
from hpdsl.ast.layouts import DimExpr
from hpdsl.ast.leaves import Literal, Name, _span
from hpdsl.ast.vocabulary import SlotsBlock
from hpdsl.diagnostics.span import Span


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


ProfileItem = Union[Kind, DefaultKind, ModelTypes, SettingsBlock, SlotsBlock, ImportRules, "FieldDecl"]


@attrs.frozen
class Profile:
    """`profile NAME { ... }`: the layer kinds of one architecture family."""

    name: Name
    items: tuple[ProfileItem, ...]
    span: Span = _span()
