"""A model's layer stack into diagnostics: its statements, its kinds, and the dimensions their flavours need.

The stack is resolved by hpdsl/ir/stack.py, whose problems are reported here, so
lowering derives the same groups the checks saw. Every check reports and carries on.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from hpdsl import ast
from hpdsl.check.model_fields import items_of, quoted
from hpdsl.diagnostics import NO_SPAN, Collector, Note, Span, did_you_mean
from hpdsl.ir.stack import StackProblem, keyword_span, model_stack, stack_kind_names
from hpdsl.scope import kind_flavours, profile_default, profile_kinds

# Problems an explicit stack has whatever the profile: reported even when it is unknown.
_STRUCTURAL = ("stack-zero-count", "stack-count-mismatch", "stack-too-large", "too-many-groups")


@attrs.frozen
class _Need:
    """What layers of one flavour need the model to state: a block or a top-level field."""

    part: int  # which of kind_flavours' pair: 0 the attention flavour, 1 the feed-forward's
    flavour: str
    name: str
    block: bool
    code: str
    layers: str
    hint: str


_NEEDS = (
    _Need(1, "moe", "moe", True, "missing-moe-dims", "MoE layers",
          "declare `moe { experts E  top_k K  expert_width W }`"),
    _Need(0, "sliding", "sliding_window", False, "missing-field", "sliding-window layers",
          "state the window: `sliding_window 4096` (HF sliding_window)"),
    _Need(0, "ssm", "ssm", True, "missing-field", "state-space layers",
          "declare `ssm { ssm_state  ssm_conv  ssm_expand  ssm_dt_rank }`"),
    _Need(0, "linear", "linear", True, "missing-linear-dims", "linear-attention layers",
          "declare `linear { key_heads  key_head_dim  value_heads  value_head_dim  conv }`"),
)
"""The flavours that need dimensions, in the order their problems are reported for a kind."""


def check_stack_statements(model: ast.Model, collector: Collector) -> None:
    """Report a second stack or layer_types, and a model stating both."""
    firsts: dict[type, ast.Stack | ast.LayerTypes] = {}
    for statement in items_of(model.items, (ast.Stack, ast.LayerTypes)):
        word = "stack" if isinstance(statement, ast.Stack) else "layer_types"
        span = keyword_span(statement.span, word)
        first = firsts.get(type(statement))
        if first is not None:
            collector.error(span, "duplicate-field", f"the model states `{word}` twice",
                            hint=f"keep one `{word}`", notes=(Note(first.span, "first stated here"),))
            continue
        firsts[type(statement)] = statement
        other = firsts.get(ast.LayerTypes if word == "stack" else ast.Stack)
        if other is not None:
            collector.error(span, "stack-conflict",
                            "the model states both an explicit stack and layer_types",
                            hint="keep one: the stack, or the layer_types it is derived from",
                            notes=(Note(other.span, "the other is stated here"),))


def check_stack(model: ast.Model, profile: ast.Profile | None, blocks: set[str],
                collector: Collector) -> None:
    """Report stack problems, unknown kinds and flavours whose dimensions are missing."""
    stack = next((item for item in model.items if isinstance(item, ast.Stack)), None)
    if profile is None:
        if stack is not None:
            for problem in model_stack(model, (), None).problems:
                if problem.code in _STRUCTURAL:
                    _emit(problem, collector)
        return
    kinds = profile_kinds(profile)
    if stack is not None:
        _check_stack_kinds(stack, profile, kinds, collector)
    result = model_stack(model, kinds, profile_default(profile))
    for problem in result.problems:
        _emit(problem, collector)
    used = dict.fromkeys(group.kind for group in result.groups)
    _check_flavours(model, profile, [k for k in used if k in kinds], blocks, collector)


def _emit(problem: StackProblem, collector: Collector) -> None:
    """Report a stack problem (model_stack has located it) as a diagnostic."""
    report = collector.warning if problem.severity == "warning" else collector.error
    report(problem.where or NO_SPAN, problem.code, problem.message, hint=problem.hint)


def _check_stack_kinds(stack: ast.Stack, profile: ast.Profile, kinds: dict[str, ast.Kind],
                       collector: Collector) -> None:
    for name in stack_kind_names(stack.body):
        if name.value not in kinds:
            collector.error(name.span, "unknown-kind",
                            f"the stack names kind '{name.value}', but profile "
                            f"'{profile.name.value}' has {quoted(kinds) or 'no kinds'}",
                            hint=did_you_mean(name.value, kinds))


def _check_flavours(model: ast.Model, profile: ast.Profile, used: list[str], blocks: set[str],
                    collector: Collector) -> None:
    """Report kinds in the stack whose flavour needs a block or field the model does not state."""
    kinds = profile_kinds(profile)
    stated = {item.name.value for item in model.items if isinstance(item, ast.Field)}
    dense = [k for k in used if _runs_dense(kinds[k], kinds, blocks)]
    if dense and "ffn_width" not in stated:
        collector.error(_kind_site(model, dense[0]), "missing-field",
                        f"layers of kind '{dense[0]}' run a dense feed-forward, but the model "
                        "states no ffn_width", hint="state the dense width: `ffn_width 11008` "
                        "(HF intermediate_size)")
    for kind in used:
        flavours = kind_flavours(kinds[kind], kinds)
        for need in _NEEDS:
            if flavours[need.part] == need.flavour and need.name not in (blocks if need.block else stated):
                lacks = f"declares no {need.name} block" if need.block else f"states no {need.name}"
                collector.error(_kind_site(model, kind), need.code,
                                f"the stack has {need.layers} (kind '{kind}' of profile "
                                f"'{profile.name.value}'), but the model {lacks}", hint=need.hint)


def _runs_dense(kind: ast.Kind, kinds: dict[str, ast.Kind], blocks: set[str]) -> bool:
    """Whether a layer of `kind` runs a dense feed-forward (its flavour, else the model's own)."""
    ffn = kind_flavours(kind, kinds)[1]
    return ffn == "dense" or (ffn is None and "moe" not in blocks)


def _kind_site(model: ast.Model, kind: str) -> Span:
    """Return where the model asks for `kind`: its first mention, else the profile it names."""
    for item in model.items:
        names: Iterable[ast.Name] = ()
        if isinstance(item, ast.Stack):
            names = stack_kind_names(item.body)
        elif isinstance(item, ast.LayerTypes):
            names = item.names
        for name in names:
            if name.value == kind:
                return name.span
    return model.profile.span if model.profile else model.name.span
