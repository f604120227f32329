"""The values of a coverage verdict: a family's finite domain, its assignments, overlaps and findings.

hpdsl/check/coverage.py builds the domain (its module docs say which values
each variable takes) and judges it, by enumeration, over bit sets
(hpdsl/check/masks.py) or by proof (hpdsl/check/prover.py); all three return
these values.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping

import attrs

from hpdsl.ir.nodes import Scalar

Assignment = Mapping[str, Scalar]


@attrs.frozen
class Variable:
    """One free variable of the domain and the representative values it takes, ascending."""

    name: str
    values: tuple[Scalar, ...]


@attrs.frozen
class Domain:
    """The free variables of a family's conditions; `axis` is the one `parallel` derives from."""

    variables: tuple[Variable, ...]
    axis: str | None = None

    @property
    def size(self) -> int:
        """Return the number of assignments."""
        return math.prod(len(v.values) for v in self.variables)

    def assignments(self) -> Iterator[dict[str, Scalar]]:
        """Yield every assignment, `parallel` derived, in ascending (lexicographic) order."""
        names = [v.name for v in self.variables]
        axis = self.axis
        for values in itertools.product(*(v.values for v in self.variables)):
            # Every selector a condition reads is a variable, so no default is needed;
            # `parallel` as hpdsl/model/axes.py with_parallel derives it.
            env: dict[str, Scalar] = dict(zip(names, values))
            env["parallel"] = axis is not None and int(env.get(axis, 1)) > 1
            yield env


@attrs.frozen
class Overlap:
    """Two variants (declaration order) that both match `example`."""

    first: str
    second: str
    example: Assignment


@attrs.frozen
class Coverage:
    """The verdict over a family's allowed domain.

    `unsatisfiable` is the index of the first require after which no assignment
    is left (None when some assignment is allowed); the other findings are
    only computed when some assignment is allowed.
    """

    @property
    def size(self) -> int:
        """Return the number of assignments of the domain."""
        return self.domain.size

    domain: Domain
    unsatisfiable: int | None = None
    overlaps: tuple[Overlap, ...] = ()
    gap: Assignment | None = None
    unreachable: tuple[str, ...] = ()
