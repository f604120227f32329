"""The words of a family's tensor-parallel `layout { ... }` block: placements and the axes dims may read."""

from __future__ import annotations

PLACEMENTS: dict[str, str] = {
    "colwise": "split over tp along the output features: dim 0 of a Linear weight [out, in] and of its bias",
    "rowwise": "split over tp along the input features: dim 1 of a Linear weight [out, in]",
    "replicate": "whole on every tp rank, which also ends backward with the whole gradient",
}
"""The placements a layout entry may give a parameter."""

PLACEMENT_DIMS: dict[str, int] = {"colwise": 0, "rowwise": 1}
"""The tensor dim a sharded placement splits when the entry names none (`colwise(2)` names one)."""

LAYOUT_AXES = ("cp", "ep", "etp", "pp")
"""Axis sizes a dims expression may read (`experts / ep`, `ffn_width / etp`); not tp: dims are the shape before tp."""

__all__ = ["LAYOUT_AXES", "PLACEMENTS", "PLACEMENT_DIMS"]
