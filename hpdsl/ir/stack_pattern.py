"""Explicit stacks (`stack [a * 3, b] * 12`) into layer groups, and layer kinds back into the shortest stack.

Expansion never unrolls more than a model may have: counts and runs are computed
from the pattern first (docs/reference.md#stack-derivation states the rules).
compress_kinds is the inverse the importer and `hpdsl describe` use.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from hpdsl import ast
from hpdsl.ir.nodes import LayerGroup
from hpdsl.ir.stack_groups import StackProblem, StackResult, merge_groups, plural
from hpdsl.model.fields import MAX_GROUPS, MAX_LAYERS

# An explicit stack is expanded only up to this many layers (the most a model may
# have); a larger one is an error reported by its count, which needs no expansion.
EXPAND_LIMIT = MAX_LAYERS
STACK_TOO_LARGE = "the stack's body expands to {listed}, more than the {limit:,} a model may have"
# A body is also refused past MAX_GROUPS maximal runs of one kind, counted without expanding.
TOO_MANY_GROUPS = "the {what} makes {listed} of one kind, more than the {limit:,} groups a model may have"
STACK_COUNT_MISMATCH = "the stack's body has {listed}, but the model states `layers {layers}`"
STACK_ZERO_COUNT = "a repetition count must be at least 1, found {count}"


def _times(repeat: ast.Literal | None) -> int:
    """Return a repetition count; a missing one means once."""
    return int(repeat.value) if repeat is not None else 1


def stack_layer_count(item: ast.StackList | ast.StackKind) -> int:
    """Return how many layers a stack (or one of its items) expands to, without expanding it."""
    times = max(_times(item.repeat), 0)
    if isinstance(item, ast.StackKind):
        return times
    return times * sum(stack_layer_count(child) for child in item.items)


def stack_group_count(item: ast.StackList | ast.StackKind) -> int:
    """Return how many maximal runs of one kind a stack expands to, without expanding it."""
    return _runs(item)[0]


def _runs(item: ast.StackList | ast.StackKind) -> tuple[int, str | None, str | None]:
    """Return (maximal runs, first kind, last kind) of an item's expansion; repeats join at equal ends."""
    times = _times(item.repeat)
    if times <= 0:
        return 0, None, None
    if isinstance(item, ast.StackKind):
        return 1, item.kind.value, item.kind.value
    count, first, last = 0, None, None
    for child in item.items:
        runs, child_first, child_last = _runs(child)
        if runs:
            count += runs - (1 if last is not None and last == child_first else 0)
            first, last = first if first is not None else child_first, child_last
    if not count:
        return 0, None, None
    return times * count - (times - 1 if first == last else 0), first, last


def too_many_groups(what: str, count: int) -> StackProblem:
    """Return the problem of a body of `count` runs (more than MAX_GROUPS)."""
    listed = plural(count, "run") if count < 10 ** 30 else "over 10^30 runs"
    return StackProblem("too-many-groups", TOO_MANY_GROUPS.format(what=what, listed=listed, limit=MAX_GROUPS),
                        hint="a model's layers go in runs of one kind: repeat a kind (`kind * N`) rather "
                             "than alternate kinds layer by layer")


def expand_stack(item: ast.StackList | ast.StackKind) -> tuple[LayerGroup, ...]:
    """Return the layer groups a stack expands to, as maximal runs; counts below 1 add nothing."""
    times = _times(item.repeat)
    if times <= 0:
        return ()
    if isinstance(item, ast.StackKind):
        return (LayerGroup(item.kind.value, times),)
    once = merge_groups(group for child in item.items for group in expand_stack(child))
    if len(once) == 1:
        return (LayerGroup(once[0].kind, once[0].count * times),)
    return merge_groups(once * times)


def stack_kind_names(item: ast.StackList | ast.StackKind) -> Iterator[ast.Name]:
    """Yield every kind name a stack mentions, in source order."""
    if isinstance(item, ast.StackKind):
        yield item.kind
        return
    for child in item.items:
        yield from stack_kind_names(child)


def _repeats(item: ast.StackList | ast.StackKind) -> Iterator[ast.Literal]:
    if item.repeat is not None:
        yield item.repeat
    if isinstance(item, ast.StackList):
        for child in item.items:
            yield from _repeats(child)


def stack_zero_counts(body: ast.StackList) -> tuple[StackProblem, ...]:
    """Return a problem for every repetition count below 1."""
    return tuple(
        StackProblem("stack-zero-count", STACK_ZERO_COUNT.format(count=repeat.value), repeat.span,
                     hint="leave out an item with no layers, or repeat it at least once")
        for repeat in _repeats(body) if int(repeat.value) < 1)


def explicit_body(body: ast.StackList, layers: int | None) -> StackResult:
    """Expand an explicit stack, checking its counts against the model's `layers`."""
    problems = list(stack_zero_counts(body))
    total = stack_layer_count(body)
    if total > EXPAND_LIMIT:
        listed = plural(total, "layer") if total < 10 ** 30 else "over 10^30 layers"
        problems.append(StackProblem(
            "stack-too-large", STACK_TOO_LARGE.format(listed=listed, limit=EXPAND_LIMIT),
            hint="check the repetition counts (`* N`): they multiply"))
        return StackResult((), tuple(problems))
    runs = stack_group_count(body)
    if runs > MAX_GROUPS:
        return StackResult((), (*problems, too_many_groups("stack's body", runs)))
    if layers is not None and total != layers:
        problems.append(StackProblem(
            "stack-count-mismatch", STACK_COUNT_MISMATCH.format(listed=plural(total, "layer"), layers=layers),
            hint=f"make the stack's body sum to {layers} layers, or change `layers`"))
    groups = expand_stack(body) if total <= EXPAND_LIMIT else ()
    return StackResult(groups, tuple(problems))

# --------------------------------------------------------------------------
# Layer kinds back into a stack
# --------------------------------------------------------------------------


def compress_kinds(kinds: Sequence[str]) -> ast.StackList:
    """Return the shortest `[run, ...] * n` stack that expands to `kinds`, one entry per layer.

    A pattern that does not divide the layers (a window every 6th of 15,385) is
    written `[[run, ...] * n, tail...]`, so its line stays short.
    """
    runs: list[tuple[str, int]] = []
    for kind in kinds:
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + 1)
        else:
            runs.append((kind, 1))
    period = next(p for p in range(1, len(runs) + 1)
                  if len(runs) % p == 0 and runs == runs[:p] * (len(runs) // p))
    if period > _SHORT_PERIOD:
        # entries written: the head's runs, one period, the tail's runs (a pattern of 2 runs 28 times and
        # 2 more: 58 runs, no whole period, written as 4 entries instead of 58)
        size, start, best = min((len(runs) - p * (_prefix_repeats(runs[h:], p) - 1), h, p)
                                for h in range(_MAX_HEAD + 1) for p in range(1, _MAX_PERIOD + 1))
        repeat = _prefix_repeats(runs[start:], best)
        if size < period:
            body = ast.StackList(_items(runs[start:start + best]), ast.Literal(repeat, "int"))
            return ast.StackList((*_items(runs[:start]), body, *_items(runs[start + best * repeat:])), None)
    repeat = len(runs) // period
    return ast.StackList(_items(runs[:period]), ast.Literal(repeat, "int") if repeat > 1 else None)


_MAX_PERIOD = 64
"""The longest run pattern compress_kinds looks for a repeat of."""

_SHORT_PERIOD = 8
"""A whole period of at most this many runs is written as it is; a longer one is searched for a repeat and a tail."""

_MAX_HEAD = 3
"""The most runs before the repeating pattern starts (dense layers before the MoE ones)."""


def _prefix_repeats(runs: Sequence[tuple[str, int]], period: int) -> int:
    """Return how many times runs[:period] repeats from the start of `runs`."""
    count = 1
    while runs[count * period:(count + 1) * period] == runs[:period]:
        count += 1
    return count


def _items(runs: Sequence[tuple[str, int]]) -> tuple[ast.StackKind, ...]:
    return tuple(ast.StackKind(ast.Name(k), ast.Literal(c, "int") if c > 1 else None) for k, c in runs)
