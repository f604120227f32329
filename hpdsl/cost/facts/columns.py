"""A bound cost model into pricing columns: one per distinct layer kind, MTP kind, embedding, output.

Every per-layer quantity the estimator computes (bytes, FLOPs, communication) is
computed once per column and then summed over a pipeline stage with the stage's
count of each column, so pricing a layer costs one array expression per kind,
not one per layer. The columns also carry the model facts the strategy checks
need (heads per kind, expert counts, widths).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import cast

import attrs

from hpdsl.bound.bind import CostGroup, CostModel, LayerConfig
from hpdsl.bound.slots import Slot
from hpdsl.cost.facts.cost_terms import DeclaredTerm, feed_forward_part, layer_saved, mixer_part
from hpdsl.cost.facts.eager import EagerWork, all_declared, end_eager, layer_eager
from hpdsl.cost.facts.casts import Casts, layer_casts
from hpdsl.cost.facts.matmuls import Matmuls, end_matmuls, layer_matmuls, with_slots
from hpdsl.cost.facts.params import (LayerParams, ParamReport, layer_params, parameters, pricing_bindings,
                                     pricing_end_slots, pricing_families, pricing_mtp_slots)
from hpdsl.cost.facts.replication import replicated_roles
from hpdsl.ir.nodes import FamilyIR


@attrs.frozen
class Column:
    """What one pricing column stands for: a layer kind (body or MTP), the embedding or the output."""

    name: str
    role: str                       # layer | mtp | embedding | output
    kind: str | None = None
    config: LayerConfig | None = None
    params: LayerParams | None = None
    whole: frozenset[str] = frozenset()  # slot roles every tp rank holds whole (hpdsl/cost/facts/replication.py)
    matmuls: Matmuls = Matmuls()  # weight multiply-adds per token from the slots' layouts (hpdsl/cost/facts/matmuls.py)
    saved: tuple[DeclaredTerm, ...] = ()  # the mixer's slots' families' `saved` terms (hpdsl/cost/formulas/memory.py)
    casts: Casts = Casts()  # what fp8-mixed casts of its linears (hpdsl/cost/facts/casts.py)
    ffn_saved: tuple[DeclaredTerm, ...] = ()  # the feed-forward's slots' families' `saved` terms (same)
    eager: EagerWork | None = None  # what its eager code dispatches, where every slot declares it (facts/eager.py)


@attrs.frozen(eq=False)
class ModelColumns:
    """A cost model's columns, the column of every body and MTP layer, and its parameter report."""

    cost_model: CostModel
    columns: tuple[Column, ...]
    body_runs: tuple[tuple[int, int], ...]   # (column, layers) per run of the body, in model order
    mtp_runs: tuple[tuple[int, int], ...]    # ... of the MTP layers
    report: ParamReport

    @property
    def layers(self) -> int:
        """Return the body's layer count."""
        return sum(count for _, count in self.body_runs)

    @property
    def mtp_columns(self) -> tuple[int, ...]:
        """Return the MTP layers' columns, each once."""
        return tuple(dict.fromkeys(column for column, _ in self.mtp_runs))

    @property
    def embedding(self) -> int:
        """Return the embedding column's index."""
        return len(self.columns) - 2

    @property
    def output(self) -> int:
        """Return the output column's index."""
        return len(self.columns) - 1

    @property
    def layer_columns(self) -> tuple[int, ...]:
        """Return the indices of the body and MTP columns."""
        return tuple(i for i, c in enumerate(self.columns) if c.role in ("layer", "mtp"))

    def layer_column(self, kind: str | None) -> Column:
        """Return the body column of layers of `kind` (None: a model without kinds)."""
        return next(c for c in self.columns if c.role == "layer" and c.kind == kind)

    @cached_property
    def names(self) -> tuple[str, ...]:
        """Return every column's name, in column order."""
        return tuple(c.name for c in self.columns)

    @cached_property
    def configs(self) -> tuple[LayerConfig, ...]:
        """Return the config of every layer column (body and MTP), in column order."""
        # model_columns gives every body and MTP column its layer's config
        return tuple(cast(LayerConfig, self.columns[i].config) for i in self.layer_columns)


def model_columns(cost_model: CostModel) -> ModelColumns:
    """Return the pricing columns of a bound model (run-length: nothing here walks the layers one by one)."""
    total = sum(g.count for g in cost_model.groups)
    n_mtp = cost_model.model.mtp if total > cost_model.model.layers else 0
    body_runs, mtp_runs = _split(cost_model.groups, total - n_mtp)
    columns: list[Column] = []
    index: dict[tuple[str, str | None], int] = {}
    families = pricing_families(cost_model)
    for role, runs in (("layer", body_runs), ("mtp", mtp_runs)):
        for kind in dict.fromkeys(kind for kind, _ in runs):  # each distinct kind once, in first-seen order
            if (role, kind) not in index:
                index[role, kind] = len(columns)
                config = cost_model.kind_config(kind)
                label, bindings = kind or "layer", pricing_bindings(cost_model, kind)
                matmuls = layer_matmuls(config, bindings, families)
                extra = pricing_mtp_slots(cost_model) if role == "mtp" else ()
                if role == "mtp":  # and its projection beside the layer (hpdsl/bound/slots.py mtp_slots)
                    matmuls = with_slots(matmuls, extra, families)
                saved = layer_saved(config, bindings, families)
                columns.append(Column(label if role == "layer" else f"mtp:{label}", role, kind,
                                      config, layer_params(config, bindings, families),
                                      replicated_roles(cost_model, config, kind), matmuls, mixer_part(saved),
                                      layer_casts(config, bindings, families, extra), feed_forward_part(saved),
                                      _with_mtp_slots(layer_eager(config, bindings, families), extra, families)))
    ends = pricing_end_slots(cost_model)
    embedding, output = end_matmuls(cost_model, ends, families)
    eager_in, eager_out = end_eager(ends, families, cost_model.model.vocab,
                                    pricing_bindings(cost_model, None).get("head", ""))
    columns += [Column("embedding", "embedding", matmuls=embedding, eager=eager_in),
                Column("output", "output", matmuls=output, eager=eager_out)]
    return ModelColumns(cost_model, tuple(columns), tuple((index["layer", k], n) for k, n in body_runs),
                        tuple((index["mtp", k], n) for k, n in mtp_runs), parameters(cost_model))


def _with_mtp_slots(work: EagerWork | None, extra: tuple[Slot, ...], families: Mapping[str, FamilyIR]
                    ) -> EagerWork | None:
    """Return a layer's eager work with the slots an MTP layer holds beside it (None where one declares none)."""
    beside = all_declared(extra, families) if extra else EagerWork()
    return None if work is None or beside is None else work + beside


def _split(groups: Iterable[CostGroup], body: int) -> tuple[list[tuple[str | None, int]], list[tuple[str | None, int]]]:
    """Return the groups' (kind, layers) runs of the first `body` layers, and of the rest (the MTP layers)."""
    before: list[tuple[str | None, int]] = []
    after: list[tuple[str | None, int]] = []
    seen = 0
    for group in groups:
        head = max(0, min(group.count, body - seen))
        if head:
            before.append((group.kind, head))
        if group.count - head:
            after.append((group.kind, group.count - head))
        seen += group.count
    return before, after


def head_counts(config: LayerConfig) -> dict[str, int]:
    """Return the head counts a tensor-parallel degree must divide, by what they are."""
    if config.attn_kind == "ssm":
        return {}  # no heads: the mixer's layout says what tp splits (families/mamba.hpf replicates it)
    if config.attn_kind == "linear":
        return {"linear-attention key heads": config.key_heads,
                "linear-attention value heads": config.value_heads}
    kv = config.kv_heads
    counts = {"attention heads": config.heads}
    if isinstance(kv, int) or float(kv).is_integer():
        counts["kv heads"] = int(kv)
    return counts
