"""A bound cost model into pricing columns: one per distinct layer kind, MTP kind, embedding, output.

Every per-layer quantity the estimator computes (bytes, FLOPs, communication) is
computed once per column and then summed over a pipeline stage with the stage's
count of each column, so pricing a layer costs one array expression per kind,
not one per layer. The columns also carry the model facts the strategy checks
need (heads per kind, expert counts, widths).
"""

from __future__ import annotations

from functools import cached_property
from typing import cast

import attrs

from hpdsl.bound.bind import CostModel, LayerConfig
from hpdsl.cost.params import LayerParams, ParamReport, layer_params, parameters
from hpdsl.cost.replication import replicated_roles

@attrs.frozen
class Column:
    """What one pricing column stands for: a layer kind (body or MTP), the embedding or the output."""

    name: str
    role: str                       # layer | mtp | embedding | output
    kind: str | None = None
    config: LayerConfig | None = None
    params: LayerParams | None = None
    whole: frozenset[str] = frozenset()  # slot roles every tp rank holds whole (cost/replication.py)


@attrs.frozen(eq=False)
class ModelColumns:
    """A cost model's columns, the column of every body and MTP layer, and its parameter report."""

    cost_model: CostModel
    columns: tuple[Column, ...]
    body: tuple[int, ...]
    mtp: tuple[int, ...]
    report: ParamReport

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
    """Return the pricing columns of a bound model."""
    kinds = cost_model.layer_kinds()
    n_mtp = cost_model.model.mtp if len(kinds) > cost_model.model.layers else 0
    body_kinds, mtp_kinds = kinds[:len(kinds) - n_mtp], kinds[len(kinds) - n_mtp:]
    columns: list[Column] = []
    index: dict[tuple[str, str | None], int] = {}
    for role, sequence in (("layer", body_kinds), ("mtp", mtp_kinds)):
        for kind in dict.fromkeys(sequence):  # each distinct kind once, in first-seen order
            if (role, kind) not in index:
                index[role, kind] = len(columns)
                config = cost_model.kind_config(kind)
                label = kind or "layer"
                columns.append(Column(label if role == "layer" else f"mtp:{label}", role, kind,
                                      config, layer_params(config),
                                      replicated_roles(cost_model, config, kind)))
    columns += [Column("embedding", "embedding"), Column("output", "output")]
    body = {k: index["layer", k] for k in dict.fromkeys(body_kinds)}
    mtp = {k: index["mtp", k] for k in dict.fromkeys(mtp_kinds)}
    return ModelColumns(cost_model, tuple(columns), tuple(map(body.__getitem__, body_kinds)),
                        tuple(map(mtp.__getitem__, mtp_kinds)), parameters(cost_model))


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
