"""The IR: frozen, serialisable values the compiler emits and every consumer reads.

Names are resolved, inheritance is applied, stacks are expanded into layer
groups and every default is filled in, so a consumer never needs the AST, the
grammar or the checks. Unset optional facts stay None ("absent is not zero")
and are omitted from registry.json.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, Optional, TypeVar, Union, cast

import attrs

from hpdsl.diagnostics.span import Span
from hpdsl.model.fields import FIELDS, RUN_FACTS, Field, required

SCHEMA_VERSION = 1

Scalar = Union[bool, int, float, str]

_Record = TypeVar("_Record")


def evolve(record: _Record, **changes: Any) -> _Record:
    """Return `record` with `changes`: attrs.evolve for RunFacts, ModelIR and LayerConfig too."""
    # Those classes are made from field tables, so mypy sees them only as stubs its attrs plugin
    # does not know; they are attrs classes at run time, and attrs checks `changes` there.
    changed: _Record = attrs.evolve(cast(Any, record), **changes)
    return changed


@attrs.frozen
class SourceRef:
    """Where a construct is declared: file (as shown in diagnostics), line, column."""

    file: str
    line: int
    col: int

    @classmethod
    def from_span(cls, span: Span) -> SourceRef:
        """Return where `span` starts."""
        return cls(span.file, span.line, span.col)


# --------------------------------------------------------------------------
# Op vocabulary and profiles
# --------------------------------------------------------------------------


@attrs.frozen
class OpInfo:
    """One op of the vocabulary."""

    name: str
    meaning: str


@attrs.frozen
class KindIR:
    """A layer kind with its complete op vector (vocabulary order), flavours and slot bindings.

    `slots` maps each bound slot (hpdsl.model.slots.SLOTS) to the family that
    fills it in this kind's layers: the profile's bindings overlaid by the
    kind's own, inherited through `from`.
    """

    name: str
    ops: dict[str, int]
    attention: Literal["full", "linear", "sliding", "ssm", "cross"] = "full"
    ffn: Literal["dense", "moe"] | None = None
    base: str | None = None
    slots: dict[str, str] = attrs.field(factory=dict)
    source: SourceRef | None = None
    wiring: str | None = None
    """How the kind's blocks meet the residual (hpdsl/bound/wiring.py); None: the model's `wiring`."""
    dims: dict[str, DimIR] = attrs.field(factory=dict)
    """The kind's own head shapes: field → dims over the model's fields (`dims { }`, inherited through `from`)."""


if TYPE_CHECKING:
    class RunFacts:
        """A profile's effective run facts: every RUN_FACTS row, unstated ones at their default."""

        __attrs_attrs__: ClassVar[tuple[attrs.Attribute[Any], ...]]

        def __init__(self, **facts: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...
else:
    RunFacts = attrs.make_class("RunFacts", {
        fact.name: attrs.field(default=fact.default, type=bool if fact.type == "bool"
                               else (int | None) if fact.default is None else int)
        for fact in RUN_FACTS.values()}, frozen=True, slots=True)
    RunFacts.__doc__ = "A profile's effective run facts: every RUN_FACTS row, unstated ones at their default."


@attrs.frozen
class FactsIR:
    """Facts HuggingFace configs of these model_types do not state (empty: all the profile's)."""

    model_types: tuple[str, ...]
    values: dict[str, Scalar]


@attrs.frozen
class WeightRuleIR:
    """`weight "hf.name" -> "built.name" [transposed]`: one state-dict name rule (hpdsl/torch/weights.py).

    A split rule (`-> split(...) by (...)`) names its parts in `parts` (`target` is the first) and their
    rows in `sizes`, dims over the model's fields; `groups`: `interleaved N`'s N, else None. A join rule
    (`weight join(...) -> ...`) names transformers' tensors joined by rows in `sources` (`source` the first).
    """

    source: str
    target: str
    transposed: bool = False
    parts: tuple[str, ...] = ()
    sizes: tuple[DimIR, ...] = ()
    groups: DimIR | None = None
    sources: tuple[str, ...] = ()


@attrs.frozen
class TranslatedValue:
    """One entry of a map's table (`true -> pre_norm`): a value a config states and the field's value it means."""

    stated: Scalar
    value: Scalar


@attrs.frozen
class ImportRulesIR:
    """How HuggingFace configs of these model_types import ("*": every config; empty: the profile's).

    `defaults`: transformers' value for an absent key (None: transformers' None);
    `maps`: config key → model field or "block.field", in the order the first
    stated key wins; `reads`: keys a built-in rule reads; `ignored`: key (or
    "glob") → why it is irrelevant at any value; `ignored_at`: key → the one
    value it is irrelevant at; `patterns`: key → character → layer kind;
    `derives`: a field the config leaves unset → its dims expression over the others;
    `weights`: transformers' state-dict name (or prefix) → the built model's, read by
    hpdsl/torch/weights.py; `unmodelled`: key → the construct it means that hpdsl does not build (refused
    unless null or at its `ignored_at` value); `translations`: a mapped key → its map's table,
    each stated value with the field's value it means. docs/importing.md describes them.
    """

    model_types: tuple[str, ...] = ()
    defaults: dict[str, Scalar | None] = attrs.field(factory=dict)
    maps: dict[str, str] = attrs.field(factory=dict)
    reads: tuple[str, ...] = ()
    ignored: dict[str, str] = attrs.field(factory=dict)
    ignored_at: dict[str, Scalar] = attrs.field(factory=dict)
    patterns: dict[str, dict[str, str]] = attrs.field(factory=dict)
    derives: dict[str, DimIR] = attrs.field(factory=dict)
    weights: tuple[WeightRuleIR, ...] = ()
    unmodelled: dict[str, str] = attrs.field(factory=dict)
    translations: dict[str, tuple[TranslatedValue, ...]] = attrs.field(factory=dict)


@attrs.frozen
class ProfileIR:
    """An op profile: its kinds in declaration order, default kind, run and model facts, slot bindings.

    `slots` maps each bound slot to its family for the profile's model-level
    slots and its layers: the top-level defaults overlaid by the profile's own
    block (each kind's effective bindings are in its KindIR). `fields` are the
    author fields it declares (`field NAME: ...`), which its models may state.
    """

    name: str
    kinds: dict[str, KindIR]
    default: str | None = None
    run: RunFacts = RunFacts()
    v_head_dim: int | None = None
    model_types: tuple[str, ...] = ()
    facts: tuple[FactsIR, ...] = ()
    slots: dict[str, str] = attrs.field(factory=dict)
    imports: tuple[ImportRulesIR, ...] = ()
    fields: tuple[Field, ...] = ()
    source: SourceRef | None = None

    def facts_for(self, model_type: str) -> dict[str, Scalar]:
        """Return the facts that hold for configs of `model_type`, later blocks winning."""
        merged: dict[str, Scalar] = {}
        for block in self.facts:
            if not block.model_types or model_type in block.model_types:
                merged.update(block.values)
        return merged


# --------------------------------------------------------------------------
# Families
# --------------------------------------------------------------------------

ConditionOp = Literal["ref", "const", "cmp", "in", "not", "and", "or", "implies"]


@attrs.frozen
class Condition:
    """A condition tree; one class for every node so the JSON form stays flat and tagged.

    - ref: `name` is a bool selector or "parallel";  const: `value` is a bool;
    - cmp: `name` `cmp` `value` (cmp one of == != < <= > >=);  in: `name` in `values`;
    - not / and / or / implies: over `operands` (implies: premise, conclusion).
    """

    op: ConditionOp
    name: str | None = None
    cmp: str | None = None
    value: Scalar | None = None
    values: tuple[Scalar, ...] = ()
    operands: tuple[Condition, ...] = ()
    text: str = ""


@attrs.frozen
class SelectorIR:
    """A typed selector and its default."""

    name: str
    type: Literal["bool", "int", "enum"]
    default: Scalar | None = None
    low: int | None = None
    high: int | None = None
    values: tuple[str, ...] = ()
    source: SourceRef | None = None


@attrs.frozen
class RequireIR:
    """A constraint every request must meet, with the message shown when it does not."""

    condition: Condition
    message: str
    source: SourceRef | None = None


@attrs.frozen
class VariantIR:
    """A concrete implementation: import path, selection rule, accepted extra arguments, parameters."""

    name: str
    path: str
    default: bool = False
    when: Condition | None = None
    accepts: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    source: SourceRef | None = None


DimOp = Literal["int", "name", "sum", "product"]


@attrs.frozen
class DimIR:
    """A dims expression tree; one class for every node so the JSON form stays flat and tagged.

    - int: `value`;  name: `name` (a slot-config name or cp/ep/pp);
    - sum: the sum of `operands`;  product: the product of `operands` divided by each of `divisors`.
    `text` (the canonical form) is filled in at the root.
    """

    op: DimOp
    value: int | None = None
    name: str | None = None
    operands: tuple[DimIR, ...] = ()
    divisors: tuple[DimIR, ...] = ()
    text: str = ""


@attrs.frozen
class LayoutEntryIR:
    """Where one parameter lives on the tp axis: its dims before tp, placement, split dim and variants.

    `dim` is the tensor dim split over tp (None when replicated); with a `unit`,
    that dim holds `unit` blocks that stay whole; `variants` are the variants
    that have the parameter (resolved from `for`, or from their params);
    `condition`, over the slot config's names, says when the module has it
    (None: always; hpdsl/ir/layouts.py `entry_present`).
    """

    path: str
    dims: tuple[DimIR, ...]
    placement: Literal["colwise", "rowwise", "replicate"]
    dim: int | None = None
    unit: DimIR | None = None
    variants: tuple[str, ...] = ()
    condition: Condition | None = None
    source: SourceRef | None = None


@attrs.frozen
class CostTermIR:
    """One cost term a family declares: forward FLOPs, or elements saved for backward, per token (`unit`).

    hpdsl/cost/facts/cost_terms.py evaluates it.

    `expr` is linear in `keys`, the keys a query attends to (a saved term's: the
    keys its score tensor holds); `replicated` runs it whole on every tp rank;
    `selective` marks its per-key work as what selective recompute and a flash
    backward run again (a saved term: what selective recompute does not keep);
    `condition` says when the module runs it (None: always). A saved term's
    `sequence` splits it by sequence outside the tp region, `routed` keeps it per token routed to an
    expert (times etp, divided by tp: a routed expert's input), `bytes` is its byte
    class (hpdsl/model/cost_terms.py BYTE_CLASSES) and `flash` says whether only a
    flash kernel keeps it (True), only a kernel without flash (False), or either (None).
    """

    unit: str
    name: str
    expr: DimIR
    replicated: bool = False
    selective: bool = False
    condition: Condition | None = None
    source: SourceRef | None = None
    sequence: bool = False
    bytes: str = "compute"
    flash: bool | None = None
    routed: bool = False


@attrs.frozen
class FamilyIR:
    """A module family: public factory, parallel axis, selectors, constraints, variants, tp layout.

    `layout` is None when the family declares none: the backend then leaves its
    modules as built at any tp (the module handles tp itself, or is replicated).
    `fields` are the author fields it declares, which its layout may read;
    `costs` the terms of its `cost { }` block (what it computes beside its weight matmuls).
    """

    name: str
    factory: str
    parallel: Literal["tp", "cp", "ep", "pp", "etp"] | None = None
    selectors: tuple[SelectorIR, ...] = ()
    requires: tuple[RequireIR, ...] = ()
    variants: tuple[VariantIR, ...] = ()
    layout: tuple[LayoutEntryIR, ...] | None = None
    fields: tuple[Field, ...] = ()
    source: SourceRef | None = None
    costs: tuple[CostTermIR, ...] = ()


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


@attrs.frozen
class LayerGroup:
    """`count` consecutive layers of one kind; MTP groups come last."""

    kind: str
    count: int
    mtp: bool = False


def _model_field(field: Field) -> Any:
    """Return the attrs field a model field is held in: absent is None, except counts whose absence is 0."""
    kind = {"int": int, "float": float, "bool": bool}.get(field.type, str)
    default = field.default if field.type == "int" else None
    return attrs.field(default=default, type=_optional(kind))


def _optional(kind: Any) -> Any:
    """Return `Optional[kind]`, the runtime type cattrs reads (attrs' stubs type `type=` as a class)."""
    return Optional[kind]  # noqa: UP007 (a runtime type for cattrs)


_MODEL_HEAD = {"name": attrs.field(type=str), "profile": attrs.field(type=str)}
_MODEL_TAIL = {
    "layer_types": attrs.field(default=None, type=_optional(tuple[str, ...])),
    "stack_stated": attrs.field(default=False, type=bool),
    # The author fields (declared in a profile or family) the model states, or their defaults.
    "extra": attrs.field(factory=dict, type=dict[str, Scalar]),
    "groups": attrs.field(default=(), type=tuple[LayerGroup, ...]),
    "source": attrs.field(default=None, type=_optional(SourceRef)),
}

if TYPE_CHECKING:
    class ModelIR:
        """A model: every field of hpdsl.model.fields.FIELDS (None = not stated) and its layer groups."""

        name: str
        profile: str
        layer_types: tuple[str, ...] | None
        stack_stated: bool
        extra: dict[str, Scalar]
        groups: tuple[LayerGroup, ...]
        source: SourceRef | None

        __attrs_attrs__: ClassVar[tuple[attrs.Attribute[Any], ...]]

        def __init__(self, name: str, profile: str, **fields: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...
else:
    ModelIR = attrs.make_class("ModelIR", {
        **_MODEL_HEAD, **{name: _model_field(field) for name, field in FIELDS.items()}, **_MODEL_TAIL,
    }, frozen=True, slots=True)
    ModelIR.__doc__ = "A model: every field of hpdsl.model.fields.FIELDS (None = not stated) and its layer groups."


def block_stated(model: ModelIR, block: str) -> bool:
    """Return whether a model states block `block` (`moe`, `linear`, `mla`): its required fields are set."""
    return any(getattr(model, name) is not None for name in required(block))


# --------------------------------------------------------------------------
# Devices and clusters (keys: hpdsl/model/machine.py)
# --------------------------------------------------------------------------


@attrs.frozen
class CurvePointIR:
    """One point of an efficiency curve: at `size`, the share `efficiency` of peak."""

    size: float
    efficiency: float


@attrs.frozen
class DeviceIR:
    """One accelerator: memory, dense peaks per dtype, bandwidths, efficiencies and links."""

    name: str
    memory_bytes: int
    memory_bandwidth: float
    memory_efficiency: float
    peak_flops: dict[str, float]
    matmul: tuple[CurvePointIR, ...]
    intra_node_bandwidth: float
    inter_node_bandwidth: float
    devices_per_node: int = 8
    source_text: str = ""
    source: SourceRef | None = None
    op_overhead: float = 0.0          # host seconds per op, forward and backward (0: not priced)
    link_latency: float = 0.0         # seconds per message step on the device's links without a cluster
    optimizer_bandwidth: float = 0.0  # bytes/s of the optimizer step (0: memory_bandwidth x efficiency)
    tensor_overhead: float = 0.0      # host seconds per parameter tensor a step (optimizer, norm, zero_grad)
    dtensor_overhead: float = 0.0     # ... per DTensor parameter (tp or dp > 1; 0: tensor_overhead)
    dtensor_op_overhead: float = 0.0  # host seconds per op of a layer under tp > 1 (0: op_overhead)
    shard_overhead: float = 0.0       # host seconds per FSDP2 unit and micro-batch (ZeRO-3; 0: not priced)
    comm_overlap: float = 1.0         # share of an overlapped collective's time hidden behind compute
    call_overhead: float = 0.0        # host seconds per eager aten call (0: the eager terms are not priced)
    eager_bandwidth: float = 0.0      # bytes/s eager elementwise kernels move (0: memory_bandwidth x efficiency)
    attention: tuple[CurvePointIR, ...] = ()  # the attention kernel's curve (empty: the matmul curve)


@attrs.frozen
class TierIR:
    """One network level of a cluster: where it sits, bandwidth per direction, latency, efficiencies."""

    name: str
    scope: str
    bandwidth: float
    latency: float
    efficiency: dict[str, float] = attrs.field(factory=dict)
    algorithm: str = "ring"  # the all-reduce's: ring or tree (hpdsl/model/machine.py ALGORITHMS)


@attrs.frozen
class ClusterIR:
    """Nodes of one device: how many per node, and the tiers within and across nodes."""

    name: str
    device: str
    devices_per_node: int
    tiers: tuple[TierIR, ...]
    source_text: str = ""
    source: SourceRef | None = None


# --------------------------------------------------------------------------
# The whole compiled unit
# --------------------------------------------------------------------------


@attrs.frozen
class RegistryIR:
    """Everything `hpdsl compile` emits: the content of registry.json."""

    schema_version: int
    source_hash: str
    ops: tuple[OpInfo, ...]
    profiles: dict[str, ProfileIR] = attrs.field(factory=dict)
    families: dict[str, FamilyIR] = attrs.field(factory=dict)
    models: dict[str, ModelIR] = attrs.field(factory=dict)
    devices: dict[str, DeviceIR] = attrs.field(factory=dict)
    clusters: dict[str, ClusterIR] = attrs.field(factory=dict)
