"""Hover: what the name under the cursor is, in Markdown.

A model shows its exact parameter counts (total and active, from
hpdsl/cost/facts/params.py) and layer groups; a field its meaning, type and default
(hpdsl/model/fields.py); a kind its op vector; a family its selectors and
variants with the rule that selects each; a profile its kinds; an op and a slot
their meaning.
"""

from __future__ import annotations

from hpdsl import ast
from hpdsl.fmt.inline import format_expr, format_selector_type
from hpdsl.lsp.analysis import Analysis, name_at
from hpdsl.lsp.resolve import Target, declaration, resolve
from hpdsl.model.fields import FIELDS, block_fields
from hpdsl.model.slots import SLOTS


def hover(analysis: Analysis, line: int, col: int) -> str | None:
    """Return the Markdown hover for the name at a 1-based position (None over nothing)."""
    occurrence = name_at(analysis, line, col)
    target = resolve(occurrence) if occurrence else None
    if target is None:
        return None
    render = {"model": _model, "profile": _profile, "kind": _kind, "family": _family,
              "op": _op, "field": _field, "block": _block, "slot": _slot}.get(target.what)
    return render(analysis, target) if render else None


def _model(analysis: Analysis, target: Target) -> str:
    registry = analysis.registry
    if registry is None or target.name not in registry.models:
        return f"**model {target.name}**\n\nparameters: not counted while the specs have errors"
    from hpdsl.bound.bind import bind
    from hpdsl.cost.facts.params import parameters

    model = registry.models[target.name]
    counts = parameters(bind(model, registry.profile(model.profile), families=registry.families))
    groups = ", ".join(f"{g.kind} x {g.count}" + (" (MTP)" if g.mtp else "") for g in model.groups)
    return (f"**model {model.name}** (profile `{model.profile}`)\n\n"
            f"- parameters: {int(counts.total):,} total ({counts.total / 1e9:,.2f} B)\n"
            f"- active per token: {int(counts.active):,}\n"
            f"- layers: {model.layers}" + (f" + {model.mtp} MTP" if model.mtp else "") + "\n"
            f"- layer groups: {groups}")


def _profile(analysis: Analysis, target: Target) -> str | None:
    found = declaration(analysis, target)
    if found is None:
        return None
    profile = found[0]
    kinds = [item.name.value for item in profile.items if isinstance(item, ast.Kind)]
    default = next((i.kind.value for i in profile.items if isinstance(i, ast.DefaultKind)), None)
    return (f"**profile {target.name}**\n\n- kinds: {', '.join(kinds) or 'none'}\n"
            f"- default kind: {default or 'none'}")


def _kind(analysis: Analysis, target: Target) -> str | None:
    registry = analysis.registry
    profile = registry.profiles.get(target.owner or "") if registry else None
    kind = profile.kinds.get(target.name) if profile else None
    if kind is not None:
        ops = "  ".join(f"{op} {count}" for op, count in kind.ops.items())
        flavour = f"attention {kind.attention}" + (f", ffn {kind.ffn}" if kind.ffn else "")
        base = f" from `{kind.base}`" if kind.base else ""
        return (f"**kind {target.name}** of profile `{target.owner}`{base}\n\n- {flavour}\n"
                f"- ops: `{ops}`")
    found = declaration(analysis, target)
    if found is None:
        return None
    stated = [f"{c.op.value} {c.count.value}" for item in found[0].items
              if isinstance(item, ast.OpsBlock) for c in item.counts]
    return f"**kind {target.name}**\n\n- ops stated here: `{'  '.join(stated)}`"


def _family(analysis: Analysis, target: Target) -> str | None:
    found = declaration(analysis, target)
    if found is None:
        return None
    lines = [f"**family {target.name}**", ""]
    for item in found[0].items:
        if isinstance(item, ast.Selector):
            lines.append(f"- selector `{item.name.value}: {format_selector_type(item.type)}`")
        elif isinstance(item, ast.ParallelAxis):
            lines.append(f"- parallel over `{item.axis.value}`")
    for item in found[0].items:
        if isinstance(item, ast.Variant):
            rule = " (default)" if item.is_default else ""
            rule += f" when `{format_expr(item.when)}`" if item.when is not None else ""
            lines.append(f"- variant `{item.name.value}`{rule}: `{item.path.value}`")
    return "\n".join(lines)


def _op(analysis: Analysis, target: Target) -> str | None:
    found = declaration(analysis, target)
    return f"**op {target.name}**: {found[0].meaning.value}" if found else None


def _field(analysis: Analysis, target: Target) -> str | None:
    field = FIELDS.get(target.name)
    if field is None:
        return None
    where = f" (in `{field.block} {{ }}`)" if field.block else ""
    facts = [f"type {field.type}" + (f": {', '.join(field.choices)}" if field.choices else "")]
    if field.default is not None:
        facts.append(f"default {field.default}")
    if field.required:
        facts.append("required")
    if field.hf:
        facts.append("HF " + ", ".join(f"`{key}`" for key in field.hf))
    return f"**{field.name}**{where}: {field.meaning}\n\n" + "; ".join(facts)


def _block(analysis: Analysis, target: Target) -> str | None:
    fields = block_fields(target.name)
    if not fields:
        return None
    rows = "\n".join(f"- `{name}`: {field.meaning}" for name, field in fields.items())
    return f"**{target.name} {{ }}** block\n\n{rows}"


def _slot(analysis: Analysis, target: Target) -> str | None:
    slot = SLOTS.get(target.name)
    return f"**slot {slot.name}** ({slot.scope}): {slot.meaning}" if slot else None
