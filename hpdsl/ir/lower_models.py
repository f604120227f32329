"""Checked models into IR: stated fields, choices and blocks, and the resolved layer groups.

Lowering assumes check_models found no error. What a model does not state stays
None ("absent is not zero"), except `mtp`, whose absence means no MTP layers.
The groups come from hpdsl/ir/stack.py, the same functions the checks ran.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from hpdsl import ast
from hpdsl.ir.nodes import LayerGroup, LinearDims, MlaDims, ModelIR, MoeDims, SourceRef
from hpdsl.ir.stack import model_stack
from hpdsl.scope import Scope, profile_default, profile_kinds

DEFAULT_PROFILE = "default"

_BLOCK_TYPES: dict[str, type] = {"moe": MoeDims, "linear": LinearDims, "mla": MlaDims}


def lower_models(scope: Scope) -> dict[str, ModelIR]:
    """Return the IR of every checked model in scope, by name, in declaration order."""
    return {name: lower_model(model, scope) for name, model in scope.models.items()}


def lower_model(model: ast.Model, scope: Scope) -> ModelIR:
    """Return the IR of one checked model."""
    profile_name = model.profile.value if model.profile else DEFAULT_PROFILE
    stated = stated_fields(model.items)
    known = attrs.fields_dict(ModelIR)
    fields = {name: value for name, value in stated.items() if name in known}
    fields["mtp"] = fields.get("mtp", 0)
    choices = {item.key.value: item.value.value for item in model.items
               if isinstance(item, ast.Choice)}
    layer_types = next((item for item in model.items if isinstance(item, ast.LayerTypes)), None)
    return ModelIR(
        name=model.name.value,
        profile=profile_name,
        **fields,
        **{key: value for key, value in choices.items() if key in known},
        **_blocks(model),
        layer_types=tuple(n.value for n in layer_types.names) if layer_types else None,
        stack_stated=any(isinstance(item, ast.Stack) for item in model.items),
        groups=model_groups(model, scope),
        source=SourceRef.from_span(model.name.span),
    )


def model_groups(model: ast.Model, scope: Scope) -> tuple[LayerGroup, ...]:
    """Return a checked model's layer groups: body, then MTP."""
    profile = scope.profiles[model.profile.value if model.profile else DEFAULT_PROFILE]
    return model_stack(model, profile_kinds(profile), profile_default(profile)).groups


def stated_fields(fields: Iterable[object]) -> dict[str, int | float | bool | str]:
    """Return the value of every field among `fields`, first statement winning; a flag is true."""
    values: dict[str, int | float | bool | str] = {}
    for field in fields:
        if isinstance(field, ast.Field) and field.name.value not in values:
            values[field.name.value] = True if field.value is None else field.value.value
    return values


def _blocks(model: ast.Model) -> dict[str, MoeDims | LinearDims | MlaDims]:
    """Return each stated block as its dimensions value, first block of a name winning."""
    dims: dict[str, MoeDims | LinearDims | MlaDims] = {}
    for item in model.items:
        if isinstance(item, ast.Block) and item.name.value not in dims:
            dims[item.name.value] = _BLOCK_TYPES[item.name.value](**stated_fields(item.fields))
    return dims
