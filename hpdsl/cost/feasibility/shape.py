"""A bound model's columns into the facts strategies are checked against: heads, widths, experts, requires."""

from __future__ import annotations

import math
from collections.abc import Iterator

import attrs
import numpy as np

from hpdsl.bound.bind import CostModel
from hpdsl.bound.config import dim_environment
from hpdsl.bound.slots import end_slots, model_slots, mtp_slots
from hpdsl.bound.tally import WHOLE_AXES, priced_variant
from hpdsl.cost.facts.columns import ModelColumns, head_counts
from hpdsl.cost.facts.params import pricing_families, pricing_mtp_slots
from hpdsl.cost.facts.roles import MIXER_ROLES
from hpdsl.ir.conditions import evaluate
from hpdsl.ir.layouts import entry_present, evaluate_dim, layout_for, whole
from hpdsl.ir.nodes import FamilyIR, RequireIR
from hpdsl.model import ops as OP
from hpdsl.model.axes import AxisSizes, condition_inputs, config_selectors
from hpdsl.model.fields import Scalar
from hpdsl.model.ops import count as op_count

Mask = np.ndarray


@attrs.frozen
class FamilyRequire:
    """A require of the family that builds a slot, with the selectors that follow the slot's config."""

    role: str
    family: FamilyIR
    require: RequireIR
    selectors: tuple[tuple[str, Scalar], ...] = ()


@attrs.frozen
class Shape:
    """The model facts the rules read."""

    heads: tuple[tuple[str, int], ...]        # what tp must divide
    a2a_heads: tuple[int, ...]                # what tp·cp must divide under all-to-all CP
    experts: int                              # routed experts (1: dense model)
    expert_widths: tuple[int, ...]            # what etp must divide
    tp_widths: tuple[tuple[str, int], ...]    # dense and shared expert widths tp must divide
    layers: int
    shard_activations: bool
    requires: tuple[FamilyRequire, ...] = ()  # every family require a slot of the model is built under
    cp_heads: tuple[int, ...] = ()            # a tp-replicated mixer's: what cp alone must divide (a2a CP)
    conv_tails: tuple[int, ...] = ()          # a Gated DeltaNet's conv - 1: the tokens a cp rank hands on


def model_shape(columns: ModelColumns) -> Shape:
    """Return the facts of a model that strategies are checked against."""
    heads: dict[tuple[str, int], None] = {}
    a2a: dict[int, None] = {}
    cp_heads: dict[int, None] = {}
    tails: dict[int, None] = {}
    widths: dict[tuple[str, int], None] = {}
    experts = 1
    expert_widths: dict[int, None] = {}
    for index in columns.layer_columns:
        column = columns.columns[index]
        config = column.config
        assert config is not None
        counts = head_counts(config)
        if config.attn_kind == "linear" and config.conv > 1:
            tails[config.conv - 1] = None
        swapped = counts.get("attention heads", counts.get("linear-attention value heads", 1))
        if MIXER_ROLES & column.whole:
            cp_heads[swapped] = None  # every tp rank holds all the heads: tp need not divide them
        else:
            heads.update(dict.fromkeys(counts.items()))
            a2a[swapped] = None
        if config.experts > 1:
            experts = max(experts, config.experts)
            expert_widths[config.ffn_width] = None
            if config.shared_experts:
                widths["shared expert width", config.shared_width] = None
        elif op_count(config.ops, OP.FF_MM):
            widths["feed-forward width", config.ffn_width] = None
    cost = columns.cost_model
    # The token table splits by rows over tp, the untied head by its vocab rows (families/embedding.hpf,
    # output_head.hpf); the build refuses a tp that does not divide them (hpdsl/torch/layout.py).
    widths["vocabulary (the token table's rows)", cost.model.vocab + (cost.model.embed_extra_rows or 0)] = None
    if not cost.model.tie_embeddings:
        widths["vocabulary (the output head's rows)", cost.model.vocab] = None
    if cost.model.learned_positions:  # the position table splits by rows over tp (families/embedding.hpf)
        rows = (cost.model.max_positions or 0) + (cost.model.position_offset or 0)
        widths["learned position table's rows", rows] = None
    widths.update(dict.fromkeys(mtp_split_widths(cost)))
    return Shape(tuple(heads), tuple(a2a), experts, tuple(expert_widths), tuple(widths),
                 cost.model.layers, cost.profile.run.shard_activations, family_requires(cost),
                 tuple(cp_heads), tuple(tails))


def mtp_split_widths(cost: CostModel) -> Iterator[tuple[str, int]]:
    """Yield (label, size) of every tp-split dim of an MTP layer's slots (the standard eh_proj's hidden rows).

    Read off their families' layouts, as the build shards them (hpdsl/torch/layout.py refuses a tp that does not
    divide a split dim); a split in head blocks (`by heads`) is the heads' rule.
    """
    families = pricing_families(cost)
    for slot in pricing_mtp_slots(cost):
        family = families.get(slot.family)
        if family is None or not family.layout:
            continue  # unpriced: hpdsl/bound/shape.py refuses the slot
        env = {**dim_environment(slot.config), **WHOLE_AXES}
        for path, entry in layout_for(family, priced_variant(family, slot.config)).items():
            if entry.dim is None or entry.unit is not None or not entry_present(entry, env):
                continue
            size = whole(evaluate_dim(entry.dims[entry.dim], env))
            if size:
                yield f"MTP layers' {slot.path}.{path} dim {entry.dim}", size


def family_requires(cost: CostModel) -> tuple[FamilyRequire, ...]:
    """Return the requires of every family that builds a slot of the model (none without families).

    A selector named like a config field is judged at the slot's value (model.py's
    build does the same): `require qk_norm and qk_norm_full -> tp == 1` refuses
    tp > 1 for a model with a full-width QK-norm only.
    """
    found: dict[tuple[str, str, tuple[tuple[str, Scalar], ...]], FamilyRequire] = {}
    slots = [*(slot for _kind, slot in model_slots(cost)), *end_slots(cost), *mtp_slots(cost)] if cost.families else []
    for slot in slots:
        family = cost.families.get(slot.family)
        if family is None:
            continue
        chosen = tuple(sorted(config_selectors(family, slot.config).items()))
        for require in family.requires:
            found.setdefault((family.name, require.message, chosen),
                             FamilyRequire(slot.role, family, require, chosen))
    return tuple(found.values())


def group_rows(columns: list[np.ndarray], n: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Return the distinct rows of non-negative int columns and each candidate's row index.

    A packed int64 key (each column's values ranked, then mixed-radix) grouped with
    bincount when small: linear, where `np.unique(axis=0)` sorts rows.
    """
    key = np.zeros(n, dtype=np.int64)
    distinct: list[np.ndarray] = []
    for column in columns:
        ranks, values = _ranks(np.asarray(column, dtype=np.int64))
        key = key * len(values) + ranks
        distinct.append(values)
    size = math.prod(len(v) for v in distinct)
    if size <= 4 * n + 4096:
        present = np.flatnonzero(np.bincount(key, minlength=size))
        index = np.full(size, -1, dtype=np.int64)
        index[present] = np.arange(len(present))
        keys, inverse = present, index[key]
    else:
        keys, inverse = np.unique(key, return_inverse=True)
    rows = []
    for k in keys.tolist():
        row = []
        for values in reversed(distinct):
            k, r = divmod(k, len(values))
            row.append(int(values[r]))
        rows.append(tuple(reversed(row)))
    return rows, inverse.ravel()


def _ranks(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    top = int(column.max(initial=0))
    if top <= 4 * len(column) + 4096:
        counts = np.bincount(column, minlength=top + 1)
        values = np.flatnonzero(counts)
        lookup = np.cumsum(counts > 0) - 1
        return lookup[column], values
    values, ranks = np.unique(column, return_inverse=True)
    return ranks.ravel(), values


def require_refuses(family: FamilyIR, require: RequireIR, row: dict[str, int], selectors: dict[str, Scalar]
                    ) -> bool:
    """Return whether `require` of `family` refuses the axis sizes `row` (the selectors at their values)."""
    sizes = AxisSizes(**row)  # the axes the require does not read stay 1: it cannot tell
    return not evaluate(require.condition, condition_inputs(family, sizes, selectors))

