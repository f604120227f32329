"""Bound models into diagnostics: every layer the torch backend would refuse to build, at compile time.

The rules are hpdsl/bound/shape.py's `layer_problems`, the very list the backend
raises BuildError from, so a spec that compiles is a spec that builds and the
estimator never prices a layer that is not built. A problem is located through
the IR's source references: at the model's name when a model statement is
involved (its `mlp`, `layer_norms`, stack, ...) with a note at the kind that
prices the layer, and at the kind's name when only the profile's op counts are,
with a note at the model.
"""

from __future__ import annotations

from hpdsl.bound.bind import CostModel
from hpdsl.bound.shape import LayerProblem, layer_problems
from hpdsl.check.clean import Clean, located
from hpdsl.diagnostics import NO_SPAN, Collector, Note
from hpdsl.model import ops


def check_shapes(clean: Clean, collector: Collector) -> Clean:
    """Report every layer of the clean models the backend cannot build; return the models that have none."""
    failed = []
    for name, cost in clean.models.items():
        problems = layer_problems(cost)
        for problem in problems:
            _report(problem, cost, collector)
        if problems:
            failed.append(name)
    return clean.without_models(failed)


def _report(problem: LayerProblem, cost: CostModel, collector: Collector) -> None:
    model = cost.model
    at_model = located(model.source, model.name) or NO_SPAN
    kind = cost.profile.kinds.get(problem.kind or "")
    at_kind = located(kind.source, kind.name) if kind is not None else None
    if at_kind is None or kind is None:
        collector.error(at_model, problem.code, problem.message, hint=problem.hint)
        return
    counted = f"kind '{kind.name}' of profile '{cost.profile.name}'"
    if problem.op is not None:
        counted += f" counts {problem.op} {ops.count(kind.ops, problem.op)}"
    if problem.field is not None:
        collector.error(at_model, problem.code, problem.message, hint=problem.hint,
                        notes=(Note(at_kind, f"{counted} here"),))
    else:
        collector.error(at_kind, problem.code, problem.message, hint=problem.hint,
                        notes=(Note(at_model, f"model '{model.name}' has layers of this kind"),))


__all__ = ["check_shapes"]
