"""Layer stacks into layer groups: explicit stacks, layer_types and profile rules, MTP appended.

The derivation rules are docs/reference.md#stack-derivation. Explicit stacks are
expanded (and kinds compressed back into one) by hpdsl/ir/stack_pattern.py; the
results and run-length helpers are hpdsl/ir/stack_groups.py's, importable from here.

Every function here is pure. Problems come back as StackProblem values rather
than diagnostics, so the model checks report them and lowering reuses the same
functions on a model the checks have passed. Groups are run-length encoded with
maximal runs, in model order, and MTP groups come last.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import attrs

from hpdsl import ast
from hpdsl.diagnostics.span import Span
from hpdsl.ir.nodes import LayerGroup
from hpdsl.ir.stack_groups import StackProblem, StackResult, layer_kinds, merge_groups, plural, run_length
from hpdsl.ir.stack_pattern import (compress_kinds, expand_stack, explicit_body, stack_group_count, stack_kind_names,
                                    stack_layer_count, too_many_groups)
from hpdsl.model.fields import FIELDS, MAX_GROUPS

__all__ = ["StackProblem", "StackResult", "append_mtp", "compress_kinds", "derive_body", "derive_stack",
           "expand_stack", "explicit_body", "keyword_span", "layer_kinds", "merge_groups", "model_int", "model_stack",
           "plural", "run_length", "stack_group_count", "stack_kind_names", "stack_layer_count", "with_mtp"]

# The kind pairs a profile may split a derived stack into, by kind name.
DENSE, MOE = "dense", "moe"
ENCODER, DECODER = "encoder", "decoder"

LAYER_TYPES_TOO_SHORT = "layer_types lists {listed}, but the model states `layers {layers}`"
LAYER_TYPES_UNKNOWN = ("layer_types names '{name}', which is not a kind of this profile; "
                       "every layer is priced as the default kind instead")
ODD_ENCODER_DECODER = ("an encoder-decoder stack needs an even layer count, "
                       "found {layers} layers")
NEEDS_DEFAULT = ("the profile has several kinds ({kinds}) and names no default, "
                 "so {what} have no kind")


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

