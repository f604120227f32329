"""`--set FIELD=VALUE` overrides of a compiled model's fields (scaled-down runs of real specs).

Each override names a field of hpdsl/model/fields.py (block fields by their flat
name: `experts`, `key_heads`), or an author field the model's profile or a family
declares (held in the model's `extra`), and a value of its type; an unknown field, a value
of the wrong type, a choice outside its choices or an int outside its bounds is an
InputError naming it. Changing `layers` keeps the first N layers of the body's
kind sequence (cycling it when N is larger), so a hybrid stack keeps its pattern
and a first-k-dense model keeps its dense layers first; MTP groups stay.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from hpdsl.errors import InputError
from hpdsl.ir.nodes import FamilyIR, LayerGroup, ModelIR, ProfileIR, evolve
from hpdsl.ir.stack import layer_kinds, run_length
from hpdsl.model.fields import FIELDS, Field, Scalar
from hpdsl.model.routing import routing_problem

_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def parse_sets(pairs: Sequence[str], declared: Mapping[str, Field] | None = None) -> dict[str, Scalar]:
    """Return field → typed value of `FIELD=VALUE` pairs; InputError naming a bad pair.

    `declared` are the author fields the model may state besides FIELDS (declared_fields).
    """
    known = {**(declared or {}), **FIELDS}
    out: dict[str, Scalar] = {}
    for pair in pairs:
        name, eq, text = pair.partition("=")
        name = name.strip().removeprefix("moe.").removeprefix("linear.").removeprefix("mla.")
        name = name.removeprefix("ssm.")
        if not eq:
            raise InputError(f"--set takes FIELD=VALUE, got '{pair}'")
        field = known.get(name)
        if field is None:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise InputError(f"--set {pair}: '{name}' is not a model field{hint}")
        out[name] = _value(field, text.strip(), pair)
    return out


def declared_fields(profile: ProfileIR, families: Mapping[str, FamilyIR]) -> dict[str, Field]:
    """Return the author fields a model of `profile` may state: the profile's, then every family's.

    The same fields, in the same order, as hpdsl/ir/lower_fields.py author_fields finds in a scope.
    """
    found: dict[str, Field] = {}
    for field in (*profile.fields, *(f for name in sorted(families) for f in families[name].fields)):
        if field.name not in FIELDS:
            found.setdefault(field.name, field)
    return found


def _value(field: Field, text: str, pair: str) -> Scalar:
    if field.type == "int":
        try:
            number = int(text)
        except ValueError:
            raise InputError(f"--set {pair}: {field.name} takes a whole number, got '{text}'") from None
        if field.minimum is not None and number < field.minimum:
            raise InputError(f"--set {pair}: {field.name} must be at least {field.minimum}")
        if field.maximum is not None and number > field.maximum:  # the bound a .hpf literal has too
            raise InputError(f"--set {pair}: {field.name} must be at most {field.maximum:,}")
        return number
    if field.type == "float":
        try:
            return float(text)
        except ValueError:
            raise InputError(f"--set {pair}: {field.name} takes a number, got '{text}'") from None
    if field.type == "bool":
        if text.lower() not in _TRUE + _FALSE:
            raise InputError(f"--set {pair}: {field.name} takes true or false, got '{text}'")
        return text.lower() in _TRUE
    if field.choices and text not in field.choices:
        raise InputError(f"--set {pair}: {field.name} takes one of {', '.join(field.choices)}, got '{text}'")
    return text


def apply_sets(model: ModelIR, sets: Mapping[str, Scalar]) -> ModelIR:
    """Return `model` with the overrides applied (its layer groups follow a new `layers`)."""
    author = {name: value for name, value in sets.items() if name not in FIELDS}
    if author:  # an author field (parse_sets checked it against its declaration) rides in `extra`
        model = evolve(model, extra={**model.extra, **author})
        sets = {name: value for name, value in sets.items() if name in FIELDS}
    if not sets:
        return model
    for name in sets:
        block = FIELDS[name].block
        if block is not None and not any(getattr(model, f) is not None
                                          for f, spec in FIELDS.items() if spec.block == block and spec.required):
            raise InputError(f"--set {name}: {model.name} has no `{block} {{ }}` block to set it in")
    changed = evolve(model, **sets)
    if changed.experts is not None and changed.top_k is not None and (problem := routing_problem(
            changed.experts, changed.top_k, changed.router_groups or 1, changed.router_group_top or 1)):
        # The cross-field rule of hpdsl/check/model_rules.py (_check_top_k) a scaled-down run trips.
        raise InputError(f"--set: {problem.message}; {problem.hint}")
    if not {"layers", "mtp", "first_k_dense"} & set(sets):
        return changed
    kinds, dense = _scaled_body(model, sets)
    groups: tuple[LayerGroup, ...] = (*run_length(kinds), *_mtp_groups(model, sets))
    extra = {} if dense is None or "first_k_dense" in sets else {"first_k_dense": dense}
    return evolve(changed, groups=groups, layer_types=None, **extra)


def _scaled_body(model: ModelIR, sets: Mapping[str, Scalar]) -> tuple[list[str], int | None]:
    """Return the body's kinds for the new `layers` and `first_k_dense`, and its leading dense count.

    A body the profile derived from first_k_dense (hpdsl/ir/stack.py: that many
    layers of the dense kind, then one other kind) is derived again from the new
    values; any other body (a hybrid pattern) is cut, or repeated, to the new
    count, a set first_k_dense moving its leading run's end.
    """
    body = layer_kinds(g for g in model.groups if not g.mtp)
    count = int(sets.get("layers", len(body)))
    dense = sum(1 for k in body[:model.first_k_dense] if k == body[0]) if model.first_k_dense and body else None
    if dense is None:
        return [body[i % len(body)] for i in range(count)], None
    wanted = min(int(sets.get("first_k_dense", model.first_k_dense or 0)), count)
    rest = body[dense:]
    if len(set(rest)) <= 1:  # dense then one kind: as the profile derives it
        return [body[0]] * wanted + rest[:1] * (count - wanted) if rest else [body[0]] * count, wanted
    kinds = [body[i % len(body)] for i in range(count)]
    if "first_k_dense" in sets:
        kinds = [body[0] if i < wanted else (rest[0] if i < dense else k) for i, k in enumerate(kinds)]
    return kinds, wanted if "first_k_dense" in sets else min(dense, count)


def _mtp_groups(model: ModelIR, sets: Mapping[str, Scalar]) -> tuple[LayerGroup, ...]:
    """Return the MTP groups, cut (or cycled) to a new `mtp` count when one is set."""
    mtp = tuple(g for g in model.groups if g.mtp)
    if "mtp" not in sets:
        return mtp
    kinds = layer_kinds(mtp) or [layer_kinds(model.groups)[-1]]
    wanted = int(sets["mtp"])
    return tuple(LayerGroup(g.kind, g.count, True) for g in run_length(kinds[i % len(kinds)] for i in range(wanted)))


__all__ = ["apply_sets", "declared_fields", "parse_sets"]
