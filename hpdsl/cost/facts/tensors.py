"""A pricing column into the parameter tensors one instance of it holds: what the optimizer walks one by one.

torch's AdamW (without `foreach`, as on the CPU), the gradient norm and
`zero_grad` each visit every parameter tensor once a step, so their host time
grows with the number of tensors, not their size (the device's
`tensor_overhead`, docs/cost-model.md#the-device-time-model). The count is read
from the layouts of the families bound to the column's slots: one tensor per
present layout entry, as hpdsl/torch/ builds them (hpdsl/torch/layout.py checks
the built module against the same layout).
"""

from __future__ import annotations

from hpdsl.bound.slots import EMBEDDING_END, Slot, layer_slots
from hpdsl.bound.tally import slot_tally
from hpdsl.cost.facts.columns import Column, ModelColumns
from hpdsl.cost.facts.params import pricing_bindings, pricing_end_slots, pricing_families, pricing_mtp_slots, towers


def slot_tensors(slot: Slot, columns: ModelColumns) -> float:
    """Return the parameter tensors of one slot: its layout's present entries (0 where no layout prices it)."""
    tally = slot_tally(slot, pricing_families(columns.cost_model))
    return float(sum(1 for _, n in tally.by_path if n > 0)) if tally is not None else 0.0


def column_tensors(column: Column, columns: ModelColumns) -> float:
    """Return the parameter tensors one instance of `column` holds (a layer, an MTP layer; the embedding; the output)."""
    cost_model = columns.cost_model
    ends = {slot.path: slot for slot in pricing_end_slots(cost_model)}
    if column.role == "embedding":  # the tables, project_in, an embedding norm, and T5's bias table per tower
        return sum(slot_tensors(slot, columns) for slot in ends.values()
                   if slot.path in EMBEDDING_END or slot.role == "position_bias")
    if column.role == "output":  # project_out, the head, and the final norm of each tower (none: no_final_norm)
        head = sum(slot_tensors(ends[path], columns) for path in ("project_out", "head") if path in ends)
        return towers(cost_model.model) * (slot_tensors(ends["norm"], columns) if "norm" in ends else 0.0) + head
    assert column.config is not None
    slots = layer_slots(column.config, pricing_bindings(cost_model, column.kind))
    if column.role == "mtp":  # its two input norms, its projection and its head norm (hpdsl/bound/slots.py mtp_slots)
        slots = (*slots, *pricing_mtp_slots(cost_model))
    return sum(slot_tensors(slot, columns) for slot in slots)
