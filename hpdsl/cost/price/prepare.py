"""A bound model into its prepared pricing data: columns and per-column coefficients, computed once."""

from __future__ import annotations

from hpdsl.bound.bind import CostModel
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.facts.tensors import column_tensors
from hpdsl.cost.formulas import comm as comm_mod
from hpdsl.cost.formulas import flops as flop_mod
from hpdsl.cost.formulas import memory as mem
from hpdsl.cost.formulas import param_shards as shards
from hpdsl.cost.price.types import Prepared


def prepare(cost_model: CostModel) -> Prepared:
    """Return the prepared pricing data of `cost_model`, with an empty PriceCache (hold it to reuse both)."""
    columns = model_columns(cost_model)
    cols = columns.columns
    return Prepared(
        columns, tuple(mem.column_act_coeffs(c, columns) for c in cols),
        tuple(flop_mod.column_flop_coeffs(c, columns) for c in cols),
        tuple(comm_mod.column_comm_coeffs(c, columns) for c in cols),
        tuple(shards.column_params(c, columns) for c in cols), shards.output_copy(columns),
        tuple(flop_mod.causal_share(c, columns) for c in cols),
        tuple(flop_mod.column_model_flops(c, columns) for c in cols),
        tuple(flop_mod.column_window(c) for c in cols), tuple(column_tensors(c, columns) for c in cols),
        tuple(flop_mod.column_chunk(c) for c in cols))
