"""Models: fields, blocks, choices, layer stacks and the model node."""

from __future__ import annotations

from typing import Union

import attrs

from hpdsl.ast.leaves import Literal, Name, _span
from hpdsl.diagnostics.span import Span


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
