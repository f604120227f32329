"""Top-level imports, the op vocabulary and slot bindings."""

from __future__ import annotations

import attrs

from hpdsl.ast.leaves import Literal, Name, _span
from hpdsl.diagnostics.span import Span


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
