"""A structured RegistryIR checked as a whole: what the schema alone cannot say.

registry.json may be edited by hand or come from elsewhere, and a consumer
(hpdsl/bound/bind.py, the torch builder) trusts what it loads; so load_registry
rejects, with the JSON path of each, every inconsistency the compiler would
never emit: a dict key that differs from its entry's name, a model whose profile
or group kinds do not exist, groups that do not sum to `layers` and `mtp`, a
dimension outside its field's bounds (hpdsl/model/fields.py), and a factory or
variant path that is not `dotted.module:ClassName` (no attribute walk:
docs/trust.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from hpdsl.ir.nodes import Condition, DimIR, FamilyIR, ModelIR, ProfileIR, RegistryIR
from hpdsl.model.fields import BLOCKS, FIELDS, MAX_COUNT, MAX_GROUPS, MAX_LAYERS, RUN_FACTS, required

# The deepest condition or dims tree loaded: what the parser accepts (hpdsl/syntax/parser.py
# MAX_NESTING); evaluating and rendering them recurses.
MAX_TREE_DEPTH = 100

# `package.module:ClassName`: a dotted module path, one colon, one identifier.
FACTORY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def registry_problems(registry: RegistryIR) -> list[str]:
    """Return `$.path: problem` for every inconsistency of a structured registry."""
    problems = list(_keys("$.profiles", registry.profiles))
    problems += _keys("$.families", registry.families)
    problems += _keys("$.models", registry.models)
    ops = {op.name for op in registry.ops}
    for name, profile in registry.profiles.items():
        problems += _keys(f"$.profiles.{name}.kinds", profile.kinds)
        problems += _profile(f"$.profiles.{name}", profile, ops)
    for name, family in registry.families.items():
        problems += _family(f"$.families.{name}", family)
    for name, model in registry.models.items():
        problems += _model(f"$.models.{name}", model, registry.profiles)
    return problems


def _keys(path: str, table: Mapping[str, Any]) -> Iterator[str]:
    for key, entry in table.items():
        if entry.name != key:
            yield f"{path}.{key}.name: the entry under '{key}' is named '{entry.name}'"


def factory_problem(path: str) -> str | None:
    """Return why `path` is not a `dotted.module:ClassName` factory string, or None."""
    if FACTORY.fullmatch(path):
        return None
    return f"'{path}' is not of the form 'dotted.module:ClassName'"


def _family(path: str, family: FamilyIR) -> Iterator[str]:
    problem = factory_problem(family.factory)
    if problem:
        yield f"{path}.factory: {problem}"
    trees: list[tuple[str, Condition | DimIR | None]] = []
    for index, variant in enumerate(family.variants):
        problem = factory_problem(variant.path)
        if problem:
            yield f"{path}.variants[{index}].path: {problem}"
        trees.append((f"{path}.variants[{index}].when", variant.when))
    trees += [(f"{path}.requires[{i}].condition", r.condition) for i, r in enumerate(family.requires)]
    for i, entry in enumerate(family.layout or ()):
        trees += [(f"{path}.layout[{i}].dims[{j}]", dim) for j, dim in enumerate(entry.dims)]
        trees.append((f"{path}.layout[{i}].unit", entry.unit))
    for where, tree in trees:
        if tree is not None and _depth(tree) > MAX_TREE_DEPTH:
            yield f"{where}: nests deeper than {MAX_TREE_DEPTH}"


def _depth(tree: Condition | DimIR) -> int:
    """Return the depth of a condition or dims tree, without recursing (it may be deep)."""
    deepest, todo = 0, [(tree, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        if depth <= MAX_TREE_DEPTH:  # one past the limit is enough to refuse it
            children = [*node.operands, *getattr(node, "divisors", ())]
            todo.extend((child, depth + 1) for child in children)
    return deepest


def _profile(path: str, profile: ProfileIR, ops: set[str]) -> Iterator[str]:
    """Yield what the pricing could not read: op vectors off the vocabulary, counts and facts out of range."""
    if profile.default is not None and profile.default not in profile.kinds:
        yield f"{path}.default: no kind '{profile.default}'"
    for name, kind in profile.kinds.items():
        where = f"{path}.kinds.{name}.ops"
        if set(kind.ops) != ops:
            missing, unknown = sorted(ops - set(kind.ops)), sorted(set(kind.ops) - ops)
            yield f"{where}: not the registry's op vocabulary (missing {missing}, unknown {unknown})"
        for op, count in kind.ops.items():
            if not 0 <= count <= MAX_COUNT:
                yield f"{where}.{op}: must be from 0 to {MAX_COUNT}, found {count}"
    for name, fact in RUN_FACTS.items():
        value = getattr(profile.run, name)
        if fact.type == "int" and value is not None and not (fact.minimum or 0) <= value <= MAX_COUNT:
            yield f"{path}.run.{name}: must be from {fact.minimum or 0} to {MAX_COUNT}, found {value}"
    if profile.v_head_dim is not None and not 1 <= profile.v_head_dim <= MAX_COUNT:
        yield f"{path}.v_head_dim: must be from 1 to {MAX_COUNT}, found {profile.v_head_dim}"


def _missing(path: str, model: ModelIR) -> Iterator[str]:
    """Yield each required field that is null: the model's own, and a stated block's."""
    for block in (None, *BLOCKS):
        needed = required(block)
        if block is not None and not any(getattr(model, name) is not None for name in needed):
            continue  # the block is not stated
        for name in needed:
            if getattr(model, name) is None:
                yield f"{path}.{name}: required{f' in a {block} block' if block else ''}, found null"


def _model(path: str, model: ModelIR, profiles: Mapping[str, ProfileIR]) -> Iterator[str]:
    yield from _missing(path, model)
    if model.learned_positions and model.max_positions is None:  # a table of no rows, priced as zero
        yield f"{path}.max_positions: required with learned_positions, found null"
    for name, field in FIELDS.items():
        value = getattr(model, name)
        if field.type != "int" or value is None:
            continue
        if field.minimum is not None and value < field.minimum:
            yield f"{path}.{name}: must be at least {field.minimum}, found {value}"
        if field.maximum is not None and value > field.maximum:
            yield f"{path}.{name}: must be at most {field.maximum}, found {value}"
    profile = profiles.get(model.profile)
    if profile is None:
        yield f"{path}.profile: no profile '{model.profile}' in the registry"
    for extra, part in ((False, "body"), (True, "mtp")):
        count = sum(1 for g in model.groups if g.mtp == extra)
        if count > MAX_GROUPS:
            yield f"{path}.groups: {count} {part} groups, more than the {MAX_GROUPS} a model may have"
            return
    for index, group in enumerate(model.groups):
        if profile is not None and group.kind not in profile.kinds:
            yield f"{path}.groups[{index}].kind: profile '{model.profile}' has no kind '{group.kind}'"
        if not 1 <= group.count <= MAX_LAYERS:
            yield f"{path}.groups[{index}].count: must be from 1 to {MAX_LAYERS}, found {group.count}"
    body = sum(g.count for g in model.groups if not g.mtp)
    mtp = sum(g.count for g in model.groups if g.mtp)
    if model.groups and body != model.layers:
        yield f"{path}.groups: the body groups hold {body} layers, but layers is {model.layers}"
    if mtp != (model.mtp or 0):
        yield f"{path}.groups: the mtp groups hold {mtp} layers, but mtp is {model.mtp or 0}"
