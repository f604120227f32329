"""Import rules: a profile's `hf [...] { ... }` block and the rules it holds (the Hf* nodes)."""

from __future__ import annotations

from typing import Union

import attrs

from hpdsl.ast.layouts import DimExpr
from hpdsl.ast.leaves import Literal, Name, _span
from hpdsl.diagnostics.span import Span


# --------------------------------------------------------------------------
# Import rules
# --------------------------------------------------------------------------


@attrs.frozen
class HfDefault:
    """`default KEY = VALUE` (or `default KEY unset`): what transformers uses for an absent key."""

    key: Name
    value: Literal | None  # None: `unset`, transformers' None
    span: Span = _span()


@attrs.frozen
class HfValue:
    """`true -> pre_norm` in a map's table: a value the config states, and the field's value it means."""

    stated: Literal
    value: Literal | Name
    span: Span = _span()


@attrs.frozen
class HfMap:
    """`map KEY -> FIELD [{ VALUE -> VALUE ... }]` (or `-> BLOCK.FIELD`): a config key read into a model field.

    `values` translates the config's values into the field's; a value it does not name is read as it is.
    """

    key: Name
    field: Name
    block: Name | None = None
    span: Span = _span()
    values: tuple[HfValue, ...] = ()


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
    diagnostic about the rule's target points at). With `join` (`weight join("a.", "b.") -> "c."`),
    transformers' tensors are joined by rows, in order, into the one target; `source` is the first.
    """

    source: Literal
    target: Literal
    transposed: bool = False
    span: Span = _span()
    split: HfSplit | None = None
    join: tuple[Literal, ...] = ()

    @property
    def sources(self) -> tuple[Literal, ...]:
        """Return every transformers name the rule reads: the join's parts, else its one source."""
        return self.join or (self.source,)

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
