"""Coverage decided exactly at any domain size: a search over value classes, no enumeration.

hpdsl/check/coverage.py enumerates a family's domain when it is small; past
that it asks this module the same questions as satisfiability queries:

- the first unsatisfiable require: the least i with requires[:i+1] unsatisfiable;
- an overlap of ruled variants a, b: requires and when(a) and when(b);
- a gap (no "otherwise" default): requires and no ruled `when`;
- a reachable ruled variant: requires and its `when`.

Each variable's representative values (coverage.Domain) are first grouped into
classes: values on which every atom of the family (a comparison, an `in` list,
a bare bool) agrees. An `in` list or an enum costs one pass over its values, so
both are linear in their size, and no formula can tell two values of a class
apart. The search then assigns the first variable (domain order) a formula still
reads, class by class in ascending order, simplifying as it goes; independent
conjuncts are solved apart and simplified formulas are memoised. Trying classes
in the order of their smallest value makes the first witness found the
lexicographically first assignment, the one enumeration would report.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Union

import attrs

from hpdsl.ir.conditions import evaluate
from hpdsl.ir.nodes import Condition, FamilyIR, Scalar
from hpdsl.model.axes import with_parallel

# A formula: a bool, ("atom", variable, true classes), ("not", f), ("and" | "or", (f, ...)).
Formula = Union[bool, tuple]
Witness = dict[int, int]
"""variable index -> class index; variables a formula leaves free take class 0."""

_ORDER: dict[str, Callable[[Scalar, Scalar], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _key(value: Scalar) -> tuple[bool, Scalar]:
    # Equality as hpdsl/ir/conditions.py defines it: a bool never equals an int.
    return isinstance(value, bool), value


class Prover:
    """The classes of one family's domain and a memoised search over them."""

    def __init__(self, names: Sequence[str], values: Sequence[Sequence[Scalar]], axis: str | None) -> None:
        """Prepare for the variables `names` taking `values` (ascending); `parallel` derives from `axis`."""
        self.names = list(names)
        self.values = [list(v) for v in values]
        self.axis = axis
        self._index = {n: i for i, n in enumerate(self.names)}
        self._atoms: dict[int, list[Condition]] = {}
        self._columns: dict[int, list[bool]] = {}  # id(atom) -> its truth per value
        self.classes: list[list[int]] = []  # per variable: the position of each class's first value
        self._of_value: list[list[int]] = []
        self._memo: dict[Formula, Witness | None] = {}

    # ---------------------------------------------------------------- classes

    def prepare(self, conditions: Sequence[Condition]) -> None:
        """Group every variable's values into classes no atom of `conditions` tells apart."""
        stack = list(conditions)
        while stack:
            node = stack.pop()
            stack.extend(node.operands)
            if node.op in ("ref", "cmp", "in"):
                var = self._variable(node)
                if var is not None:
                    self._atoms.setdefault(var, []).append(node)
        for var, values in enumerate(self.values):
            atoms = self._atoms.get(var, [])
            columns = [self._column(atom, values) for atom in atoms]
            self._columns.update((id(atom), column) for atom, column in zip(atoms, columns))
            seen: dict[tuple[bool, ...], int] = {}
            of_value: list[int] = []
            firsts: list[int] = []
            for position in range(len(values)):
                signature = tuple(column[position] for column in columns)
                if signature not in seen:
                    seen[signature] = len(firsts)
                    firsts.append(position)
                of_value.append(seen[signature])
            self.classes.append(firsts)
            self._of_value.append(of_value)

    def _variable(self, node: Condition) -> int | None:
        name = self.axis if node.name == "parallel" else str(node.name)
        return None if name is None else self._index.get(name)

    def _column(self, atom: Condition, values: Sequence[Scalar]) -> list[bool]:
        if atom.name == "parallel":
            return [evaluate(atom, {"parallel": int(v) > 1}) for v in values]
        if atom.op == "in":
            members = {_key(v) for v in atom.values}
            return [_key(v) in members for v in values]
        if atom.op == "cmp" and atom.cmp in ("==", "!="):
            target = _key(atom.value if atom.value is not None else False)
            same = atom.cmp == "=="
            return [(_key(v) == target) == same for v in values]
        if atom.op == "cmp" and all(isinstance(v, int) and not isinstance(v, bool) for v in values) \
                and isinstance(atom.value, int) and not isinstance(atom.value, bool):
            compare, right = _ORDER[str(atom.cmp)], atom.value
            return [compare(v, right) for v in values]
        name = str(atom.name)
        return [evaluate(atom, {name: v}) for v in values]

    # ---------------------------------------------------------------- formulas

    def formula(self, condition: Condition) -> Formula:
        """Return `condition` over classes (call `prepare` with it first)."""
        op = condition.op
        if op == "const":
            return bool(condition.value)
        if op in ("ref", "cmp", "in"):
            var = self._variable(condition)
            if var is None:  # `parallel` of a family with no axis: with_parallel makes it false
                return evaluate(condition, {"parallel": False})
            column = self._columns[id(condition)]
            true = frozenset(c for c, first in enumerate(self.classes[var]) if column[first])
            return _atom(var, true, len(self.classes[var]))
        if op == "not":
            return _not(self.formula(condition.operands[0]))
        if op == "implies":
            premise, conclusion = condition.operands
            return _or((_not(self.formula(premise)), self.formula(conclusion)))
        parts = tuple(self.formula(o) for o in condition.operands)
        return _and(parts) if op == "and" else _or(parts)

    # ---------------------------------------------------------------- search

    def solve(self, formula: Formula) -> Witness | None:
        """Return the lexicographically first witness of `formula`, or None when it never holds."""
        if formula is True:
            return {}
        if formula is False:
            return None
        if formula in self._memo:
            return self._memo[formula]
        assert isinstance(formula, tuple)
        found = self._split(formula)
        self._memo[formula] = found
        return found

    def _split(self, formula: tuple) -> Witness | None:
        if formula[0] == "and":
            groups = _components(formula[1])
            if len(groups) > 1:
                witness: Witness = {}
                for group in groups:
                    part = self.solve(group[0] if len(group) == 1 else ("and", tuple(group)))
                    if part is None:
                        return None
                    witness.update(part)
                return witness
        var = min(_variables(formula))
        for cls in range(len(self.classes[var])):
            found = self.solve(_assign(formula, var, cls))
            if found is not None:
                return {**found, var: cls}
        return None

    def assignment(self, witness: Witness) -> dict[str, Scalar]:
        """Return the environment a witness stands for, `parallel` derived, as enumeration yields it."""
        env = {name: self.values[var][self.classes[var][witness.get(var, 0)]]
               for var, name in enumerate(self.names)}
        return with_parallel(env, self.axis)

    def order(self, witness: Witness) -> tuple[int, ...]:
        """Return the witness's positions in the domain: the enumeration order of its assignment."""
        return tuple(self.classes[var][witness.get(var, 0)] for var in range(len(self.names)))


# -------------------------------------------------------------------- formula algebra


def _atom(var: int, true: frozenset[int], size: int) -> Formula:
    if not true:
        return False
    if len(true) == size:
        return True
    return ("atom", var, true)


def _not(f: Formula) -> Formula:
    if isinstance(f, bool):
        return not f
    return f[1] if f[0] == "not" else ("not", f)


def _and(parts: Sequence[Formula]) -> Formula:
    kept: list[Formula] = []
    for part in parts:
        if part is False:
            return False
        if part is True:
            continue
        kept.extend(part[1] if part[0] == "and" else (part,))
    if not kept:
        return True
    return kept[0] if len(kept) == 1 else ("and", tuple(dict.fromkeys(kept)))


def _or(parts: Sequence[Formula]) -> Formula:
    kept: list[Formula] = []
    for part in parts:
        if part is True:
            return True
        if part is False:
            continue
        kept.extend(part[1] if part[0] == "or" else (part,))
    if not kept:
        return False
    return kept[0] if len(kept) == 1 else ("or", tuple(dict.fromkeys(kept)))


def _assign(f: Formula, var: int, cls: int) -> Formula:
    if isinstance(f, bool):
        return f
    tag = f[0]
    if tag == "atom":
        return (cls in f[2]) if f[1] == var else f
    if tag == "not":
        return _not(_assign(f[1], var, cls))
    parts = tuple(_assign(p, var, cls) for p in f[1])
    return _and(parts) if tag == "and" else _or(parts)


def _variables(f: Formula) -> frozenset[int]:
    if isinstance(f, bool):
        return frozenset()
    if f[0] == "atom":
        return frozenset((f[1],))
    if f[0] == "not":
        return _variables(f[1])
    return frozenset().union(*(_variables(p) for p in f[1]))


def _components(parts: Sequence[Formula]) -> list[list[Formula]]:
    """Group conjuncts that share variables (transitively); groups never share one."""
    groups: list[tuple[set[int], list[Formula]]] = []
    for part in parts:
        names = set(_variables(part))
        merged = [g for g in groups if g[0] & names]
        keep = [g for g in groups if not g[0] & names]
        for g in merged:
            names |= g[0]
        keep.append((names, [p for g in merged for p in g[1]] + [part]))
        groups = keep
    return [g[1] for g in groups]


# -------------------------------------------------------------------- the coverage questions


@attrs.frozen
class ProvedCoverage:
    """What the prover decided; coverage.py turns it into its Coverage verdict."""

    unsatisfiable: int | None = None
    overlaps: tuple[tuple[str, str, Mapping[str, Scalar]], ...] = ()
    gap: Mapping[str, Scalar] | None = None
    unreachable: tuple[str, ...] = ()


def prove_family(family: FamilyIR, names: Sequence[str], values: Sequence[Sequence[Scalar]],
                 axis: str | None) -> ProvedCoverage:
    """Answer coverage's questions for `family` over the domain (names, values, axis)."""
    prover = Prover(names, values, axis)
    requires = [r.condition for r in family.requires]
    ruled = [v for v in family.variants if v.when is not None]
    prover.prepare(requires + [v.when for v in ruled if v.when is not None])
    allowed: list[Formula] = []
    for index, condition in enumerate(requires):
        allowed.append(prover.formula(condition))
        if prover.solve(_and(allowed)) is None:
            return ProvedCoverage(unsatisfiable=index)
    base = _and(allowed)
    whens = {v.name: prover.formula(v.when) for v in ruled if v.when is not None}
    overlaps: list[tuple[tuple[int, ...], int, int, dict[str, Scalar]]] = []
    for i, first in enumerate(ruled):
        for j in range(i + 1, len(ruled)):
            found = prover.solve(_and((base, whens[first.name], whens[ruled[j].name])))
            if found is not None:
                overlaps.append((prover.order(found), i, j, prover.assignment(found)))
    overlaps.sort(key=lambda o: (o[0], o[1], o[2]))
    gap = None
    if not any(v.default and v.when is None for v in family.variants):
        found = prover.solve(_and((base, *(_not(w) for w in whens.values()))))
        gap = None if found is None else prover.assignment(found)
    unreachable = tuple(v.name for v in family.variants if not v.default and (
        v.when is None or prover.solve(_and((base, whens[v.name]))) is None))
    return ProvedCoverage(None, tuple((ruled[i].name, ruled[j].name, env) for _, i, j, env in overlaps),
                          gap, unreachable)
