"""What resolving a stack returns, and the run-length helpers every part of it shares.

Groups are run-length encoded with maximal runs, in model order, and MTP groups
come last (hpdsl/ir/stack.py). Problems come back as StackProblem values rather
than diagnostics, so the model checks report them and lowering reuses the same
functions on a model the checks have passed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import attrs

from hpdsl.diagnostics.span import Span
from hpdsl.ir.nodes import LayerGroup


@attrs.frozen
class StackProblem:
    """A problem found while resolving a stack; `where` None means the model as a whole."""

    code: str
    message: str
    where: Span | None = None
    hint: str | None = None
    severity: Literal["error", "warning"] = "error"


@attrs.frozen
class StackResult:
    """Resolved layer groups (body then MTP) and the problems found on the way."""

    groups: tuple[LayerGroup, ...] = ()
    problems: tuple[StackProblem, ...] = ()

    @property
    def body(self) -> tuple[LayerGroup, ...]:
        """Return the body groups, without the MTP group."""
        return tuple(group for group in self.groups if not group.mtp)


def merge_groups(groups: Iterable[LayerGroup]) -> tuple[LayerGroup, ...]:
    """Return `groups` as maximal runs: adjacent groups of one kind merged, empty ones dropped."""
    merged: list[LayerGroup] = []
    for group in groups:
        if group.count <= 0:
            continue
        if merged and merged[-1].kind == group.kind and merged[-1].mtp == group.mtp:
            merged[-1] = LayerGroup(group.kind, merged[-1].count + group.count, group.mtp)
        else:
            merged.append(group)
    return tuple(merged)


def run_length(kinds: Iterable[str]) -> tuple[LayerGroup, ...]:
    """Return one group per maximal run of equal kind names, in order."""
    return merge_groups(LayerGroup(kind, 1) for kind in kinds)


def layer_kinds(groups: Iterable[LayerGroup]) -> list[str]:
    """Return the kind of every layer the groups hold, one entry per layer."""
    return [group.kind for group in groups for _ in range(group.count)]


def plural(count: int, noun: str) -> str:
    """Return `count noun`, the noun in the plural unless the count is one."""
    return f"{count} {noun}" + ("" if count == 1 else "s")
