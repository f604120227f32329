"""A layer's declared `saved` terms into activation coefficients: by byte class, split and kernel.

What a family's module keeps for its backward is declared with the family
(the `saved` terms of families/*.hpf; docs/language.md, "Saved activations"),
evaluated once per column (hpdsl/cost/facts/cost_terms.py). Each term lands in
the ActCoeffs bucket that prices its kind of tensor (hpdsl/cost/formulas/memory.py
`activation`), so the grid still prices one array expression per column:

- per token, kept under selective recompute: at the compute dtype or a fixed
  width (norm, mask, fp32), split as the heads (t), by sequence (sp) or whole
  on every tp rank (replicate); or per token routed to an expert (routed: a
  routed expert's input, at the compute dtype, times etp and divided by t);
- per token and key, `without flash` and dropped by selective recompute: a
  score tensor at the softmax dtype, its compute-dtype copy (`cast`) or a fixed
  width (a dropout mask), times the keys the tensor holds;
- per token, `with flash` and dropped by selective recompute: a flash kernel's
  row statistics, at a fixed width.

The checker (hpdsl/check/cost_terms.py) refuses any other combination.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import attrs

from hpdsl.cost.facts.cost_terms import DeclaredTerm
from hpdsl.cost.facts.impl_terms import FP32
from hpdsl.ir.nodes import RunFacts


@attrs.frozen
class SavedCoeffs:
    """A layer's declared saved terms per token, in memory.py's ActCoeffs buckets (same names, same meaning)."""

    sp_c: float = 0.0
    sp_b: float = 0.0
    t_c: float = 0.0
    t_b: float = 0.0
    whole_c: float = 0.0
    whole_b: float = 0.0
    sc_sm: float = 0.0
    sc_c: float = 0.0
    sc_b: float = 0.0
    flash_b: float = 0.0
    routed_c: float = 0.0  # ActCoeffs.routed_in


def fixed_width(name: str, run: RunFacts) -> Fraction:
    """Return the bytes per element of a fixed byte class (norm, mask, fp32) under the profile's run facts."""
    widths = {"norm": run.norm_bytes, "mask": run.dropout_bytes, "fp32": FP32}
    return Fraction(widths[name])


def saved_coeffs(saved: Iterable[DeclaredTerm], run: RunFacts) -> SavedCoeffs:
    """Return a layer's declared saved terms as activation coefficients, each summed exactly, then as a float."""
    sums: dict[str, Fraction] = {}

    def add(bucket: str, value: Fraction) -> None:
        sums[bucket] = sums.get(bucket, Fraction(0)) + value

    for term in saved:
        fixed = term.bytes not in ("compute", "softmax", "cast")
        width = fixed_width(term.bytes, run) if fixed else Fraction(1)
        if term.flash:
            add("flash_b", term.t * width)
        elif term.flash is False:
            add("sc_b" if fixed else "sc_sm" if term.bytes == "softmax" else "sc_c", term.ts * width)
        else:
            split = "whole" if term.replicated else "sp" if term.sequence else "routed" if term.routed else "t"
            add(f"{split}_b" if fixed else f"{split}_c", term.t * width)
    return SavedCoeffs(**{bucket: float(value) for bucket, value in sums.items()})


__all__ = ["SavedCoeffs", "fixed_width", "saved_coeffs"]
