"""A name in the document into what it names, and where that is declared.

The AST node holding a name says what the name stands for (a model's `: base` is
a profile, a stack entry is a kind of the model's profile, a slot binding's
second name is a family, ...); declarations are then looked up in every file in
scope (the document, its imports and the standard library).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from hpdsl import ast
from hpdsl.diagnostics import Span
from hpdsl.lsp.analysis import Analysis, Occurrence, enclosing

What = Literal["model", "profile", "kind", "family", "op", "field", "block", "slot", "selector",
               "variant", "choice"]


@attrs.frozen
class Target:
    """What a name stands for; `owner` is the profile of a kind or the family of a selector."""

    what: What
    name: str
    owner: str | None = None


def resolve(occurrence: Occurrence) -> Target | None:
    """Return what a name in the document stands for (None for names that name nothing declared)."""
    parent, name = occurrence.parent, occurrence.name
    value = name.value
    if isinstance(parent, ast.Model):
        return Target("model" if name is parent.name else "profile", value)
    if isinstance(parent, ast.Profile):
        return Target("profile", value)
    if isinstance(parent, (ast.Kind, ast.DefaultKind)):
        return Target("kind", value, _profile_of(occurrence))
    if isinstance(parent, (ast.StackKind, ast.LayerTypes)):
        model = enclosing(occurrence, ast.Model)
        return Target("kind", value, model.profile.value if model and model.profile else None)
    if isinstance(parent, ast.SlotBinding):
        return Target("slot" if name is parent.slot else "family", value)
    if isinstance(parent, ast.Family):
        return Target("family", value)
    if isinstance(parent, (ast.OpCount, ast.OpDecl)):
        return Target("op", value)
    if isinstance(parent, ast.Field):
        return Target("field", value)
    if isinstance(parent, ast.Block):
        return Target("block", value)
    if isinstance(parent, ast.Choice):
        return Target("field" if name is parent.key else "choice", value)
    return _in_family(occurrence)


def _profile_of(occurrence: Occurrence) -> str | None:
    profile = enclosing(occurrence, ast.Profile)
    return profile.name.value if profile else None


def _in_family(occurrence: Occurrence) -> Target | None:
    family = enclosing(occurrence, ast.Family)
    if family is None:
        return None
    parent, name = occurrence.parent, occurrence.name
    if isinstance(parent, ast.Variant) and name is parent.name:
        return Target("variant", name.value, family.name.value)
    if isinstance(parent, (ast.Selector, ast.Reference, ast.Comparison, ast.Membership)):
        return Target("selector", name.value, family.name.value)
    return None


def declaration(analysis: Analysis, target: Target) -> tuple[Any, Span] | None:
    """Return the node that declares a target and the span of its name (None if not declared)."""
    if target.what in ("model", "profile", "family"):
        cls = {"model": ast.Model, "profile": ast.Profile, "family": ast.Family}[target.what]
        for node, _ in analysis.declarations(cls):
            if node.name.value == target.name:
                return node, node.name.span
    if target.what == "kind":
        return _kind(analysis, target)
    if target.what == "op":
        for vocabulary, _ in analysis.declarations(ast.Vocabulary):
            for op in vocabulary.ops:
                if op.name.value == target.name:
                    return op, op.name.span
    if target.what in ("selector", "variant"):
        return _family_member(analysis, target)
    return None


def _kind(analysis: Analysis, target: Target) -> tuple[Any, Span] | None:
    # A kind named in a known profile is that profile's; otherwise the first of that name.
    found = None
    for profile, _ in analysis.declarations(ast.Profile):
        for item in profile.items:
            if isinstance(item, ast.Kind) and item.name.value == target.name:
                if profile.name.value == target.owner:
                    return item, item.name.span
                found = found or (item, item.name.span)
    return found


def _family_member(analysis: Analysis, target: Target) -> tuple[Any, Span] | None:
    cls = ast.Selector if target.what == "selector" else ast.Variant
    for family, _ in analysis.declarations(ast.Family):
        if family.name.value == target.owner:
            for item in family.items:
                if isinstance(item, cls) and item.name.value == target.name:
                    return item, item.name.span
    return None
