"""Coverage over bit sets: every condition of a family judged over its whole domain at once.

Assignment i of a coverage.Domain (the order Domain.assignments yields them in:
lexicographic, the last variable fastest) is bit i of a Python int. An atom (a
bare name, a comparison, an `in` list, a constant) is judged once per value of
the one variable it reads, by the runtime's own `evaluate`; `not`, `and`, `or`
and `->` are then bitwise operations. A family costs one pass over its
condition trees instead of one interpretation of every condition per
assignment, and the verdict is the one hpdsl/check/coverage.py
`enumerate_coverage` reaches, counterexamples and their order included
(tests/property/test_prover_props.py holds the two equal). Where an atom
cannot be judged alone (a name outside the domain, a value `evaluate`
rejects) `mask_coverage` returns None and the caller enumerates, which reports
exactly what it always did.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hpdsl.check.domain import Assignment, Coverage, Domain, Overlap
from hpdsl.ir.conditions import evaluate
from hpdsl.ir.nodes import Condition, FamilyIR, Scalar

_ATOMS = frozenset({"ref", "cmp", "in"})


class _Unjudged(Exception):
    """An atom `evaluate` rejects on its own: the caller enumerates instead."""


class _Masks:
    """The bit sets of one domain: per variable and value, then per condition."""

    def __init__(self, domain: Domain) -> None:
        """Lay out the domain's assignments as bits (last variable fastest)."""
        self.domain = domain
        self.sizes = [len(v.values) for v in domain.variables]
        self.size = 1
        for n in self.sizes:
            self.size *= n
        self.full = (1 << self.size) - 1
        self.index = {v.name: k for k, v in enumerate(domain.variables)}
        self.strides = [1] * len(self.sizes)
        for k in range(len(self.sizes) - 2, -1, -1):
            self.strides[k] = self.strides[k + 1] * self.sizes[k + 1]
        self._value_masks: dict[int, list[int]] = {}

    def value_masks(self, k: int) -> list[int]:
        """Return, per value of variable `k`, the assignments where it takes that value."""
        found = self._value_masks.get(k)
        if found is None:
            stride, period = self.strides[k], self.strides[k] * self.sizes[k]
            repeat = self.full // ((1 << period) - 1)  # a 1 at the start of every period
            block = (1 << stride) - 1
            found = self._value_masks[k] = [(block << (d * stride)) * repeat for d in range(self.sizes[k])]
        return found

    def of(self, c: Condition) -> int:
        """Return the assignments where `c` holds."""
        op = c.op
        if op in _ATOMS:
            return self._atom(c)
        if op == "and":
            mask = self.full
            for operand in c.operands:
                mask &= self.of(operand)
            return mask
        if op == "or":
            mask = 0
            for operand in c.operands:
                mask |= self.of(operand)
            return mask
        if op == "not":
            return self.full ^ self.of(c.operands[0])
        if op == "implies":
            return (self.full ^ self.of(c.operands[0])) | self.of(c.operands[1])
        return self.full if evaluate(c, {}) else 0  # a constant

    def _atom(self, c: Condition) -> int:
        name = str(c.name)
        if name == "parallel":
            return self._parallel(c)
        k = self.index.get(name)
        if k is None:
            raise _Unjudged(name)
        mask = 0
        ref = c.op == "ref"
        for value, holds in zip(self.domain.variables[k].values, self.value_masks(k)):
            # A bare bool name is its value (evaluate's _truth); anything else asks evaluate.
            if value is True if ref and isinstance(value, bool) else evaluate(c, {name: value}):
                mask |= holds
        return mask

    def _parallel(self, c: Condition) -> int:
        # `parallel` as Domain.assignments derives it: the family axis's size > 1.
        axis = self.domain.axis
        k = None if axis is None else self.index.get(axis)
        if k is None:
            return self.full if evaluate(c, {"parallel": False}) else 0
        mask = 0
        for value, holds in zip(self.domain.variables[k].values, self.value_masks(k)):
            if evaluate(c, {"parallel": int(value) > 1}):
                mask |= holds
        return mask

    def assignment(self, mask: int) -> Assignment:
        """Return the first assignment of a non-empty `mask`, as Domain.assignments yields it."""
        i = (mask & -mask).bit_length() - 1
        digits = [0] * len(self.sizes)
        for k in range(len(self.sizes) - 1, -1, -1):
            i, digits[k] = divmod(i, self.sizes[k])
        env: dict[str, Scalar] = {v.name: v.values[d] for v, d in zip(self.domain.variables, digits)}
        axis = self.domain.axis
        env["parallel"] = axis is not None and int(env.get(axis, 1)) > 1
        return env


def mask_coverage(family: FamilyIR, domain: Domain) -> Coverage | None:
    """Return enumerate_coverage's verdict, computed over bit sets; None where it must enumerate."""
    masks = _Masks(domain)
    if masks.size == 0:
        return None
    try:
        requires = [masks.of(r.condition) for r in family.requires]
        ruled = [(v.name, masks.of(v.when)) for v in family.variants if v.when is not None]
    except Exception:  # _Unjudged, or what evaluate raises: enumeration raises it where it always did
        return None
    allowed, last_failing = masks.full, -1
    for i, holds in enumerate(requires):
        if allowed & ~holds:  # some assignment the earlier requires allow fails here first
            last_failing = i
        allowed &= holds
    if not allowed:
        return Coverage(domain, unsatisfiable=last_failing)
    otherwise = [v.name for v in family.variants if v.default and v.when is None]
    unmatched = allowed
    for _, holds in ruled:
        unmatched &= ~holds
    gap = masks.assignment(unmatched) if unmatched and not otherwise else None
    reached = {name for name, holds in ruled if holds & allowed}
    unreachable = tuple(v.name for v in family.variants if not v.default and v.name not in reached)
    return Coverage(domain, overlaps=_overlaps(masks, allowed, ruled, otherwise, unmatched),
                    gap=gap, unreachable=unreachable)


def _overlaps(masks: _Masks, allowed: int, ruled: Sequence[tuple[str, int]], otherwise: Sequence[str],
              unmatched: int) -> tuple[Overlap, ...]:
    # Enumeration records a pair at its first assignment, pairs of one assignment in the order
    # itertools.combinations gives them; an assignment matches ruled variants or the otherwise
    # defaults, never both, so (first assignment, pair order) sorts them as enumeration finds them.
    found: list[tuple[int, int, str, str, int]] = []
    for order, ((a, ha), (b, hb)) in enumerate(itertools.combinations(ruled, 2)):
        both = allowed & ha & hb
        if both:
            found.append(((both & -both).bit_length(), order, a, b, both))
    if unmatched and len(otherwise) > 1:
        first = (unmatched & -unmatched).bit_length()
        found += [(first, order, a, b, unmatched)
                  for order, (a, b) in enumerate(itertools.combinations(otherwise, 2))]
    found.sort(key=lambda f: (f[0], f[1]))
    return tuple(Overlap(a, b, masks.assignment(both)) for _, _, a, b, both in found)
