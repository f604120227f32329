"""Checked models into IR: stated fields, choices and blocks, and the resolved layer groups.

Lowering assumes check_models found no error. Block fields are held flat, under
their own names (hpdsl/model/fields.py). What a model does not state stays None
("absent is not zero"), except counts whose absence is 0 (`mtp`). The author
fields a model may state (its profile's and the families', hpdsl/ir/lower_fields.py)
are held in `extra`: stated, else their defaults.
The groups come from hpdsl/ir/stack.py, the same functions the checks ran.
"""

from __future__ import annotations

from collections.abc import Iterable

from hpdsl import ast
from hpdsl.ir.lower_fields import author_fields
from hpdsl.ir.nodes import LayerGroup, ModelIR, Scalar, SourceRef
from hpdsl.ir.stack import model_stack
from hpdsl.model.fields import FIELDS
from hpdsl.scope import Scope, model_profile, profile_default, profile_kinds


def lower_models(scope: Scope) -> dict[str, ModelIR]:
    """Return the IR of every checked model in scope, by name, in declaration order."""
    return {name: lower_model(model, scope) for name, model in scope.models.items()}


def lower_model(model: ast.Model, scope: Scope) -> ModelIR:
    """Return the IR of one checked model."""
    profile_name = model_profile(model)
    values = model_values(model)
    fields = {name: value for name, value in values.items() if name in FIELDS}
    author = author_fields(scope, profile_name)
    extra = {name: values.get(name, field.default) for name, field in author.items()}
    layer_types = next((item for item in model.items if isinstance(item, ast.LayerTypes)), None)
    return ModelIR(
        name=model.name.value,
        profile=profile_name,
        **fields,
        layer_types=tuple(n.value for n in layer_types.names) if layer_types else None,
        stack_stated=any(isinstance(item, ast.Stack) for item in model.items),
        extra={name: value for name, value in extra.items() if value is not None},
        groups=model_groups(model, scope),
        source=SourceRef.from_span(model.name.span),
    )


def model_groups(model: ast.Model, scope: Scope) -> tuple[LayerGroup, ...]:
    """Return a checked model's layer groups: body, then MTP."""
    profile = scope.profiles[model_profile(model)]
    return model_stack(model, profile_kinds(profile), profile_default(profile)).groups


def stated_fields(fields: Iterable[object]) -> dict[str, Scalar]:
    """Return the value of every field among `fields`, first statement winning; a flag is true."""
    values: dict[str, Scalar] = {}
    for field in fields:
        if isinstance(field, ast.Field) and field.name.value not in values:
            values[field.name.value] = True if field.value is None else field.value.value
    return values


def model_values(model: ast.Model) -> dict[str, Scalar]:
    """Return every field, choice and block field a model states, flat, first statement winning."""
    values: dict[str, Scalar] = stated_fields(model.items)
    for item in model.items:
        if isinstance(item, ast.Choice):
            values.setdefault(item.key.value, item.value.value)
    seen: set[str] = set()
    for item in model.items:
        if isinstance(item, ast.Block) and item.name.value not in seen:
            seen.add(item.name.value)
            for name, value in stated_fields(item.fields).items():
                values.setdefault(name, value)
    return values
