"""Layer stacks into layer groups: explicit stacks, layer_types and profile rules.

The derivation rules are docs/reference.md#stack-derivation.

Every function here is pure. Problems come back as StackProblem values rather
than diagnostics, so the model checks report them and lowering reuses the same
functions on a model the checks have passed. Groups are run-length encoded with
maximal runs, in model order, and MTP groups come last.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, Literal

import attrs

from hpdsl import ast
from hpdsl.diagnostics.span import Span
from hpdsl.ir.nodes import LayerGroup
from hpdsl.model.fields import FIELDS, MAX_GROUPS, MAX_LAYERS

# The kind pairs a profile may split a derived stack into, by kind name.
DENSE, MOE = "dense", "moe"
ENCODER, DECODER = "encoder", "decoder"

# An explicit stack is expanded only up to this many layers (the most a model may
# have); a larger one is an error reported by its count, which needs no expansion.
EXPAND_LIMIT = MAX_LAYERS
STACK_TOO_LARGE = "the stack's body expands to {listed}, more than the {limit:,} a model may have"
# A body is also refused past MAX_GROUPS maximal runs of one kind, counted without expanding.
TOO_MANY_GROUPS = "the {what} makes {listed} of one kind, more than the {limit:,} groups a model may have"

LAYER_TYPES_TOO_SHORT = "layer_types lists {listed}, but the model states `layers {layers}`"
LAYER_TYPES_UNKNOWN = ("layer_types names '{name}', which is not a kind of this profile; "
                       "every layer is priced as the default kind instead")
STACK_COUNT_MISMATCH = "the stack's body has {listed}, but the model states `layers {layers}`"
STACK_ZERO_COUNT = "a repetition count must be at least 1, found {count}"
ODD_ENCODER_DECODER = ("an encoder-decoder stack needs an even layer count, "
                       "found {layers} layers")
NEEDS_DEFAULT = ("the profile has several kinds ({kinds}) and names no default, "
                 "so {what} have no kind")


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


# --------------------------------------------------------------------------
# Run-length encoding
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# Explicit stacks: `stack [a * 3, b] * 12`
# --------------------------------------------------------------------------


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
# Derived stacks (docs/reference.md#stack-derivation)
# --------------------------------------------------------------------------


def derive_body(kinds: Collection[str], default: str | None, layers: int, *,
                layer_types: Sequence[ast.Name] = (), first_k_dense: int = 0) -> StackResult:
    """Derive the body groups from layer_types, else the profile's kind pairs, else its default."""
    problems: list[StackProblem] = []
    if layer_types:
        if len(layer_types) < layers:
            message = LAYER_TYPES_TOO_SHORT.format(listed=plural(len(layer_types), "layer"),
                                                   layers=layers)
            return StackResult((), (StackProblem(
                "layer-types-too-short", message,
                hint=f"list one kind per layer ({layers} names), or state `stack [...]`"),))
        used = layer_types[:layers]  # a cropped model keeps the checkpoint's longer list
        unknown = _unknown_names(used, kinds)
        if not unknown:
            runs = 1 + sum(1 for a, b in zip(used, used[1:]) if a.value != b.value)
            if runs > MAX_GROUPS:
                return StackResult((), (too_many_groups("layer_types list", runs),))
            return StackResult(run_length(name.value for name in used))
        problems += unknown
    structural = _structural_body(kinds, default, layers, first_k_dense)
    return StackResult(structural.groups, tuple(problems) + structural.problems)


def _unknown_names(names: Sequence[ast.Name], kinds: Collection[str]) -> list[StackProblem]:
    """Return one warning per distinct name that is not a kind, at its first use."""
    seen: set[str] = set()
    problems = []
    for name in names:
        if name.value not in kinds and name.value not in seen:
            seen.add(name.value)
            problems.append(StackProblem(
                "layer-types-unknown-kind", LAYER_TYPES_UNKNOWN.format(name=name.value), name.span,
                hint=f"the profile's kinds are {_listing(kinds)}", severity="warning"))
    return problems


def _structural_body(kinds: Collection[str], default: str | None, layers: int,
                     first_k_dense: int) -> StackResult:
    """Apply the profile rules in upstream order: dense/moe, encoder/decoder, default."""
    if DENSE in kinds and MOE in kinds:
        dense = min(max(first_k_dense, 0), layers)
        return StackResult(merge_groups((LayerGroup(DENSE, dense), LayerGroup(MOE, layers - dense))))
    if ENCODER in kinds and DECODER in kinds:
        if layers % 2:
            return StackResult((), (StackProblem(
                "odd-encoder-decoder", ODD_ENCODER_DECODER.format(layers=layers),
                hint="count the encoder and decoder layers together: two equal halves"),))
        half = layers // 2
        return StackResult(merge_groups((LayerGroup(ENCODER, half), LayerGroup(DECODER, half))))
    if default is None:
        return StackResult((), (_needs_default(kinds, "the layers"),))
    return StackResult(merge_groups((LayerGroup(default, layers),)))


def _needs_default(kinds: Collection[str], what: str) -> StackProblem:
    return StackProblem("stack-needs-default", NEEDS_DEFAULT.format(kinds=_listing(kinds), what=what),
                        hint="state the stack with `stack [...]` or `layer_types [...]`, "
                             "or give the profile a `default` kind")


def plural(count: int, noun: str) -> str:
    """Return `count noun`, the noun in the plural unless the count is one."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _listing(kinds: Collection[str]) -> str:
    return ", ".join(f"'{kind}'" for kind in kinds) or "none"


def append_mtp(body: Sequence[LayerGroup], mtp: int, kinds: Collection[str],
               default: str | None) -> StackResult:
    """Append one MTP group of the last body kind (the default when the body is empty)."""
    if mtp <= 0:
        return StackResult(tuple(body))
    kind = body[-1].kind if body else default
    if kind is None:
        return StackResult(tuple(body), (_needs_default(kinds, "the MTP layers"),))
    return StackResult(tuple(body) + (LayerGroup(kind, mtp, mtp=True),))


# --------------------------------------------------------------------------
# A model's stack statements
# --------------------------------------------------------------------------


def model_int(model: ast.Model, name: str, minimum: int = 0) -> int | None:
    """Return the first top-level int field `name`, or None when unstated or not a valid int."""
    for item in model.items:
        if isinstance(item, ast.Field) and item.name.value == name:
            value = item.value
            limit = FIELDS[name].maximum if name in FIELDS else None
            if value is None or value.kind != "int" or int(value.value) < minimum or (
                    limit is not None and int(value.value) > limit):
                return None
            return int(value.value)
    return None


def _first(model: ast.Model, kind: type) -> ast.ModelItem | None:
    return next((item for item in model.items if isinstance(item, kind)), None)


def derive_stack(kinds: Collection[str], default: str | None, layers: int, *,
                 layer_types: Sequence[ast.Name] = (), first_k_dense: int = 0,
                 mtp: int = 0) -> StackResult:
    """Derive the body by the stack-derivation rules and append the MTP group."""
    body = derive_body(kinds, default, layers, layer_types=layer_types, first_k_dense=first_k_dense)
    return with_mtp(body, mtp, kinds, default)


def with_mtp(body: StackResult, mtp: int, kinds: Collection[str], default: str | None) -> StackResult:
    """Append the MTP group to a body, unless the body has errors (its MTP kind is unknown then)."""
    if any(problem.severity == "error" for problem in body.problems):
        return body
    full = append_mtp(body.groups, mtp, kinds, default)
    return StackResult(full.groups, body.problems + full.problems)


def model_stack(model: ast.Model, kinds: Collection[str], default: str | None) -> StackResult:
    """Resolve a model's groups: its stack if stated, else derived; MTP appended; problems located."""
    layers = model_int(model, "layers", minimum=1)
    stack = _first(model, ast.Stack)
    types = _first(model, ast.LayerTypes)
    if isinstance(stack, ast.Stack):
        body = explicit_body(stack.body, layers)
    elif layers is None:
        return StackResult()  # the missing or invalid `layers` is reported on its own
    else:
        body = derive_body(kinds, default, layers,
                           layer_types=types.names if isinstance(types, ast.LayerTypes) else (),
                           first_k_dense=model_int(model, "first_k_dense") or 0)
    full = with_mtp(body, model_int(model, "mtp") or 0, kinds, default)
    return StackResult(full.groups, tuple(_locate(p, model, stack, types) for p in full.problems))


def _locate(problem: StackProblem, model: ast.Model, stack: ast.ModelItem | None,
            types: ast.ModelItem | None) -> StackProblem:
    """Give a model-level problem the span it is about."""
    if problem.where is not None:
        return problem
    sites: dict[str, Span | None] = {
        "stack-count-mismatch": keyword_span(stack.span, "stack") if stack else None,
        "stack-too-large": keyword_span(stack.span, "stack") if stack else None,
        "too-many-groups": (keyword_span(stack.span, "stack") if stack else
                            keyword_span(types.span, "layer_types") if types else None),
        "layer-types-too-short": keyword_span(types.span, "layer_types") if types else None,
        "odd-encoder-decoder": _field_value_span(model, "layers"),
        "stack-needs-default": model.profile.span if model.profile else None,
    }
    return attrs.evolve(problem, where=sites.get(problem.code) or model.name.span)


def _field_value_span(model: ast.Model, name: str) -> Span | None:
    for item in model.items:
        if isinstance(item, ast.Field) and item.name.value == name:
            return item.value.span if item.value is not None else item.name.span
    return None


def keyword_span(span: Span, keyword: str) -> Span:
    """Return the span of the keyword a statement starting at `span` opens with."""
    return Span(span.file, span.line, span.col, span.line, span.col + len(keyword))


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
    if period > _MAX_PERIOD:
        # entries written: the head's runs, one period, the tail's runs
        size, start, best = min((len(runs) - p * (_prefix_repeats(runs[h:], p) - 1), h, p)
                                for h in range(_MAX_HEAD + 1) for p in range(1, _MAX_PERIOD + 1))
        repeat = _prefix_repeats(runs[start:], best)
        if size < len(runs):
            body = ast.StackList(_items(runs[start:start + best]), ast.Literal(repeat, "int"))
            return ast.StackList((*_items(runs[:start]), body, *_items(runs[start + best * repeat:])), None)
    repeat = len(runs) // period
    return ast.StackList(_items(runs[:period]), ast.Literal(repeat, "int") if repeat > 1 else None)


_MAX_PERIOD = 64
"""The longest run pattern compress_kinds looks for a repeat of."""

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
