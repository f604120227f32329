"""What is left of the language's Python tables while they move to hpdsl/model/: the axes and slot roles."""

from __future__ import annotations

AXES = ("tp", "cp", "ep", "pp")
"""The mesh axes a family condition may name; `parallel` is the family axis > 1."""

SLOT_FAMILIES: dict[str, str] = {
    "attention": "attention",
    "linear_attention": "gated_delta_net",
    "mla": "mla",
    "mlp": "mlp",
    "experts": "grouped_experts",
    "shared_experts": "mlp",
}
"""The family that fills each slot role of a built layer, until profiles bind slots in .hpf."""
