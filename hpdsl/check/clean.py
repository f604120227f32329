"""The declarations that checked without errors, lowered and bound: what the IR passes judge.

The AST checks (hpdsl/check/__init__.py) run first and never raise. Then only
the declarations with no error inside them, and none in what they depend on
(a model's profile, the op vocabulary), are lowered, so lowering and binding
may assume the checks passed, exactly as hpdsl/ir/lower.py does. The IR passes
report through the IR's source references (`located`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from hpdsl.bound.bind import CostModel, bind
from hpdsl.diagnostics import Diagnostic, Span
from hpdsl.ir.lower import Lowered
from hpdsl.ir.lower_families import lower_family
from hpdsl.ir.lower_models import lower_model
from hpdsl.ir.lower_profiles import lower_profile
from hpdsl.ir.nodes import FamilyIR, ProfileIR, SourceRef
from hpdsl.scope import Scope, model_profile


@attrs.frozen
class Clean:
    """The clean declarations in scope: families lowered, models lowered and bound with their profiles."""

    profiles: dict[str, ProfileIR]  # the clean profiles the clean models name
    families: dict[str, FamilyIR]
    models: dict[str, CostModel]

    def without_models(self, names: Iterable[str]) -> Clean:
        """Return this set less the models `names` (a pass found errors in them)."""
        dropped = set(names)
        return attrs.evolve(self, models={n: m for n, m in self.models.items() if n not in dropped})

    def lowered(self) -> Lowered:
        """Return what this check lowered, for the registry to reuse (hpdsl/ir/lower.py)."""
        return Lowered(self.profiles, self.families, {name: bound.model for name, bound in self.models.items()})


def lower_clean(scope: Scope, diagnostics: Sequence[Diagnostic]) -> Clean:
    """Lower the families and bind the models (their profiles lowered) that no error lies in or under."""
    errors = [d.span for d in diagnostics if d.is_error]
    vocabulary = scope.vocabulary is not None and not has_errors(scope.vocabulary.span, errors)
    families = {name: lower_family(family) for name, family in scope.families.items()
                if not has_errors(family.span, errors)}
    # Only binding a model reads a profile's IR (the IR passes judge models and families), so a
    # profile no clean model names is checked but not lowered: a third of a check of many profiles.
    profiles: dict[str, ProfileIR] = {}
    models = {}
    for name, model in scope.models.items():
        if has_errors(model.span, errors):
            continue
        wanted = model_profile(model)
        if wanted not in profiles:
            profile = scope.profiles.get(wanted)
            if profile is None or not vocabulary or has_errors(profile.span, errors):
                continue
            profiles[wanted] = lower_profile(profile, scope)
        models[name] = bind(lower_model(model, scope), profiles[wanted], families=families)
    return Clean(profiles, families, models)


def has_errors(span: Span, errors: Sequence[Span]) -> bool:
    """Return whether any of the `errors` spans starts inside `span`."""
    start, end = (span.line, span.col), (span.end_line, span.end_col)
    return any(e.file == span.file and start <= (e.line, e.col) <= end for e in errors)


def located(source: SourceRef | None, name: str) -> Span | None:
    """Return the span of `name` written at `source` (an IR node's name), or None without a source."""
    if source is None:
        return None
    return Span(source.file, source.line, source.col, source.line, source.col + max(len(name), 1))


__all__ = ["Clean", "has_errors", "located", "lower_clean"]
