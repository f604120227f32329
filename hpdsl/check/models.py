"""Models into diagnostics: the profile each names, then its fields, blocks, cross-field rules and layer stack.

Each concern has its module: fields, blocks and choices hpdsl/check/model_fields.py,
the rules across fields hpdsl/check/model_rules.py, the stack hpdsl/check/model_stack.py.
Every check reports and carries on.
"""

from __future__ import annotations

from collections.abc import Iterator

from hpdsl import ast
from hpdsl.check.model_fields import (TOP_FIELDS, check_blocks, check_choices, check_duplicate_blocks,
                                      check_model_fields, check_required, items_of, quoted)
from hpdsl.check.model_rules import check_heads, check_moe_rules, check_positions
from hpdsl.check.model_stack import check_stack, check_stack_statements
from hpdsl.diagnostics import Collector, Note, did_you_mean
from hpdsl.ir.lower_fields import author_fields
from hpdsl.model import ops as OP
from hpdsl.scope import DEFAULT_PROFILE, Scope, model_profile


def check_models(scope: Scope, collector: Collector) -> None:
    """Report every problem with the models in scope."""
    for model in _models(scope):
        _check_model(model, scope, collector)
        _check_priceable(model, scope, collector)


def _check_priceable(model: ast.Model, scope: Scope, collector: Collector) -> None:
    """Report a model whose op vocabulary lacks ops the estimator prices (they would price zero)."""
    if scope.vocabulary is None:
        return  # reported once, as no-vocabulary
    missing, _ = OP.unpriced(scope.op_names)
    if missing:
        collector.warning(model.name.span, "unpriced-vocabulary",
                          f"model '{model.name.value}' is priced with an op vocabulary that lacks "
                          f"{quoted(missing)}: its layers would price those as zero",
                          hint="declare every op the estimator prices (hpdsl/model/ops.py): "
                               + ", ".join(OP.PRICED),
                          notes=(Note(scope.vocabulary.span, "the vocabulary is declared here"),))


def _models(scope: Scope) -> Iterator[ast.Model]:
    """Yield every model declaration, duplicates included, so each body is checked."""
    for file in scope.files:
        yield from (item for item in file.items if isinstance(item, ast.Model))


def _check_model(model: ast.Model, scope: Scope, collector: Collector) -> None:
    """Report every problem with one model, concern by concern, in a fixed order."""
    profile = _resolve_profile(model, scope, collector)
    # The author fields its profile and the families declare (hpdsl/check/fields.py checks them).
    author = author_fields(scope, model_profile(model))
    top = {**TOP_FIELDS, **{n: f for n, f in author.items() if f.block is None}}
    fields = check_model_fields(items_of(model.items, ast.Field), top, "model", collector)
    blocks = check_blocks(model, author, collector)
    if "moe" in blocks:
        check_moe_rules(blocks["moe"], collector)
    check_duplicate_blocks(model, collector)
    check_stack_statements(model, collector)
    check_choices(model, collector)
    check_required(model, author, collector)
    check_heads(fields, collector)
    check_positions(fields, collector)
    check_stack(model, profile, set(blocks), collector)


# --------------------------------------------------------------------------
# Profile
# --------------------------------------------------------------------------


def _resolve_profile(model: ast.Model, scope: Scope, collector: Collector) -> ast.Profile | None:
    """Return the model's profile, reporting a name that is not declared."""
    name = model_profile(model)
    profile = scope.profiles.get(name)
    if profile is not None:
        return profile
    if model.profile is None:
        collector.error(model.name.span, "unknown-profile",
                        f"model '{model.name.value}' names no profile, and no '{DEFAULT_PROFILE}' "
                        "profile is in scope",
                        hint="name its profile: `model NAME : PROFILE { ... }`")
    else:
        collector.error(model.profile.span, "unknown-profile",
                        f"model '{model.name.value}' names profile '{name}', which is not declared",
                        hint=did_you_mean(name, scope.profiles))
    return None
