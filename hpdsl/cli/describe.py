"""The bound cost IR into what `hpdsl stack` prints: layer groups and each kind's fields."""

from __future__ import annotations

from typing import Any

from hpdsl.bound.bind import CostModel


def describe_stack(cost_model: CostModel) -> dict[str, Any]:
    """Return the JSON object of `hpdsl stack --json`."""
    model = cost_model.model
    return {
        "model": model.name,
        "profile": model.profile,
        "layers": model.layers,
        "mtp": model.mtp,
        "groups": [{"kind": g.kind, "count": g.count, "mtp": g.mtp} for g in model.groups],
        "cost_groups": [{"kind": g.kind, "count": g.count, "mtp": g.mtp} for g in cost_model.groups],
        "kinds": {
            name: {"attention": kind.attention, "ffn": kind.ffn, "fields": _jsonable(kind.fields)}
            for name, kind in cost_model.kinds.items()
        },
    }


def render_stack(cost_model: CostModel) -> str:
    """Return the readable form of `hpdsl stack`: one line per group, then each kind's fields."""
    model = cost_model.model
    mtp = f" + {model.mtp} MTP" if model.mtp else ""
    lines = [f"model {model.name} (profile {model.profile}): {model.layers} layers{mtp}"]
    if len(model.groups) > 8:
        lines.append("  " + _pattern(model))
    start = 0
    width = max((len(g.kind) for g in model.groups), default=4)
    for group in model.groups if len(model.groups) <= 8 else ():
        end = start + group.count - 1
        span = f"{start}" if end == start else f"{start}-{end}"
        tag = "  MTP" if group.mtp else ""
        lines.append(f"  layers {span:<9} {group.kind:<{width}} x {group.count}{tag}")
        start = end + 1
    if len(cost_model.groups) == 1 and cost_model.groups[0].kind is None:
        lines.append("  priced as one group of all layers on the base config (the kind changes nothing)")
    for name, kind in cost_model.kinds.items():
        flavour = f"attention {kind.attention}" + (f", ffn {kind.ffn}" if kind.ffn else "")
        lines.append(f"kind {name}: {flavour}")
        ops = "  ".join(f"{op} {count}" for op, count in kind.fields["ops"].items())
        lines.append(f"  ops     {ops}")
        fields = [f"{key} {_text(value)}" for key, value in kind.fields.items() if key != "ops"]
        if fields:
            lines.append("  fields  " + "  ".join(fields))
    return "\n".join(lines)


def _pattern(model: Any) -> str:
    """Return the body as a compact stack (`[a * 3, b] * 12`) and the MTP layers after it."""
    from hpdsl.fmt import format_stack_list
    from hpdsl.ir.stack import compress_kinds

    body = [g.kind for g in model.groups if not g.mtp for _ in range(g.count)]
    mtp = [g for g in model.groups if g.mtp]
    text = f"stack {format_stack_list(compress_kinds(body))}"
    return text + "".join(f", then MTP {g.kind} x {g.count}" for g in mtp)


def _jsonable(fields: dict[str, Any]) -> dict[str, Any]:
    return {key: dict(value) if isinstance(value, dict) else value for key, value in fields.items()}


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
