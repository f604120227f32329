"""A family request and a job (context, mesh) into one resolved variant; pure, nothing is built.

Resolution follows the family's compiled rules through hpdsl.ir.conditions, the
very evaluator the static coverage check uses, so what the checker proves about
a family is what happens at run time. The steps, each failing with a
ResolutionError that names the module path:

1. the job's axis sizes, from the mesh and the declared context (mesh.py);
2. explicit selectors typed against their declarations, the rest defaulted;
3. every `require`, in declaration order (the first violated one is reported);
4. exactly one matching variant;
5. its import path, imported lazily and only under the allowed prefixes;
6. its constructor: it must name `config` or `module`, and every remaining
   argument must be both a named parameter of the constructor and listed in
   the variant's `accepts` (a `**kwargs` catch-all accepts nothing).

Resolution never mutates its input; signatures and imports are cached, since it
runs once per layer.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from pathlib import Path
from typing import Any

import attrs
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from hpdsl.diagnostics import did_you_mean
from hpdsl.errors import ResolutionError
from hpdsl.ir.conditions import matching_variants, violated_requires
from hpdsl.ir.nodes import FamilyIR, Scalar, SelectorIR, SourceRef, VariantIR
from hpdsl.ir.validate import factory_problem
from hpdsl.model.axes import AxisSizes, condition_inputs
from hpdsl.torch.mesh import ContextLike, JobMesh, job_context

DEFAULT_PREFIXES: tuple[str, ...] = ("hpdsl.torch.modules",)
"""Where factory and variant paths may point unless the application trusts more (docs/trust.md)."""

TRUSTED_VARIABLE = "HPDSL_TRUSTED"
"""The environment variable listing more trusted module prefixes, comma-separated."""

RUNTIME_ARGUMENTS = ("config", "module", "module_fqn", "context")
"""What the builder passes itself, to constructors that name them; never request arguments."""

_RESERVED = frozenset({*RUNTIME_ARGUMENTS, "mesh", "registry", "allowed_prefixes"})
_EXPLICIT = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _frozen_copy(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    # A deep copy: a caller mutating its dict (or a list inside it) later cannot
    # change what was requested.
    return MappingProxyType(copy.deepcopy(dict(arguments)))


@attrs.frozen(hash=False)
class FamilyRequest:
    """A family and its explicit arguments (selectors and constructor arguments), before selection."""

    family: FamilyIR
    arguments: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_copy)

    def __attrs_post_init__(self) -> None:
        reserved = sorted(set(self.arguments) & _RESERVED)
        if reserved:
            raise ResolutionError(f"family '{self.family.name}': {reserved} are build_family's own "
                                  "keywords, not family arguments; pass them to build_family")

    def with_arguments(self, **changes: Any) -> FamilyRequest:
        """Return a copy with `changes` applied to the arguments; this request is unchanged."""
        return FamilyRequest(self.family, {**self.arguments, **changes})

    def to_dict(self) -> dict[str, Any]:
        """Return the request as plain data: the family's name and the explicit arguments."""
        return {"family": self.family.name, "arguments": copy.deepcopy(dict(self.arguments))}


@attrs.frozen(hash=False)
class ResolvedFamily:
    """One validated choice: the variant, its constructor and what it is called with."""

    family: FamilyIR
    variant: VariantIR
    constructor: Callable[..., Any]
    arguments: Mapping[str, Any]
    selectors: Mapping[str, Scalar]
    axis_sizes: AxisSizes
    parallel: bool

    @property
    def clause(self) -> str:
        """Return the rule that chose the variant, as written: `when ...` or `default`."""
        when = self.variant.when
        if when is None:
            return "default"
        return ("default when " if self.variant.default else "when ") + when.text

    @property
    def source(self) -> SourceRef | None:
        """Return where the chosen variant is declared."""
        return self.variant.source


def describe(module_fqn: str) -> str:
    """Return how messages name a module path (the root is `<root>`)."""
    return module_fqn or "<root>"


def resolve_family(request: FamilyRequest, context: ContextLike = None,
                   mesh: DeviceMesh | JobMesh | None = None, *, module_fqn: str = "",
                   allowed_prefixes: Sequence[str] = DEFAULT_PREFIXES) -> ResolvedFamily:
    """Pick exactly one variant of `request`'s family for a job; raise ResolutionError if none fits."""
    where = describe(module_fqn)
    family = request.family
    sizes = job_context(mesh, context, where=where).sizes
    prefix = f"{where}: family '{family.name}'"
    explicit, extras = _split_arguments(family, request.arguments, prefix)
    env = condition_inputs(family, sizes, explicit)
    try:
        _check_requires(family, env, prefix)
        variant = _select_variant(family, env, prefix)
    except ResolutionError as exc:
        if exc.message.startswith(prefix):
            raise
        raise ResolutionError(f"{prefix}: {exc.message}") from None
    constructor = import_variant(variant.path, allowed_prefixes, where=f"{prefix}, variant '{variant.name}'")
    _check_constructor(constructor, variant, extras, f"{prefix}, variant '{variant.name}'")
    selectors = {s.name: env[s.name] for s in family.selectors}
    return ResolvedFamily(family, variant, constructor, MappingProxyType(extras),
                          MappingProxyType(selectors), sizes, bool(env["parallel"]))


# --------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------


def _split_arguments(family: FamilyIR, arguments: Mapping[str, Any],
                     prefix: str) -> tuple[dict[str, Scalar], dict[str, Any]]:
    """Return (the explicit selectors, typed; the other arguments); every selector left out needs a default."""
    declared = {s.name: s for s in family.selectors}
    selectors: dict[str, Scalar] = {}
    extras: dict[str, Any] = {}
    for name, value in arguments.items():
        if name in declared:
            selectors[name] = check_selector(declared[name], value, prefix)
        else:
            extras[name] = copy.deepcopy(value)
    for selector in family.selectors:
        if selector.name not in selectors and selector.default is None:
            raise ResolutionError(f"{prefix}: selector '{selector.name}' has no default; "
                                  f"state it{_at(selector.source)}")
    return selectors, extras


def check_selector(selector: SelectorIR, value: object, prefix: str) -> Scalar:
    """Return `value` if it is a value of `selector`'s declared type; raise ResolutionError if not."""
    what = f"{prefix}: selector '{selector.name}'"
    if selector.type == "bool":
        if type(value) is not bool:
            raise ResolutionError(f"{what} must be a bool, found {_shown(value)}")
        return value
    if selector.type == "int":
        if type(value) is not int:  # a bool is not an int here
            raise ResolutionError(f"{what} must be an int, found {_shown(value)}")
        low, high = selector.low, selector.high
        if (low is not None and value < low) or (high is not None and value > high):
            raise ResolutionError(f"{what} must lie in [{low}, {high}], found {value}")
        return value
    if not isinstance(value, str) or value not in selector.values:
        options = ", ".join(selector.values)
        hint = f"; {did_you_mean(value, selector.values)}" if isinstance(value, str) else ""
        raise ResolutionError(f"{what} must be one of {options}, found {_shown(value)}{hint}")
    return value


def _shown(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


# --------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------


def _check_requires(family: FamilyIR, env: Mapping[str, Scalar], prefix: str) -> None:
    violated = violated_requires(family.requires, env)
    if violated:
        first = violated[0]
        raise ResolutionError(f"{prefix}: {first.message}{_at(first.source)}")


def _select_variant(family: FamilyIR, env: Mapping[str, Scalar], prefix: str) -> VariantIR:
    matches = matching_variants(family.variants, env)
    if len(matches) == 1:
        return matches[0]
    shown = ", ".join(f"{k}={_value_text(v)}" for k, v in env.items())
    if not matches:
        rules = "; ".join(f"{v.name} ({_rule_text(v)})" for v in family.variants)
        raise ResolutionError(f"{prefix}: no variant matches {shown}; the variants are {rules}")
    names = ", ".join(f"'{v.name}'" for v in matches)
    raise ResolutionError(f"{prefix}: variants {names} all match {shown}; exactly one must")


def _rule_text(variant: VariantIR) -> str:
    if variant.when is None:
        return "default" if variant.default else "never by rule"
    return ("default when " if variant.default else "when ") + variant.when.text


def _value_text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _at(source: SourceRef | None) -> str:
    return f" (declared at {source.file}:{source.line}:{source.col})" if source else ""


# --------------------------------------------------------------------------
# Import paths and constructors
# --------------------------------------------------------------------------


def is_allowed(path: str, allowed_prefixes: Sequence[str]) -> bool:
    """Return whether import path `module:attr` lies under one of the allowed package prefixes."""
    module = path.partition(":")[0]
    # "hpdsl.torch." allows hpdsl.torch and below, never hpdsl.torchvision.
    return any(f"{module}.".startswith(p if p.endswith(".") else p + ".") for p in allowed_prefixes)


def trusted_prefixes(allowed_prefixes: Sequence[str] = DEFAULT_PREFIXES) -> tuple[str, ...]:
    """Return `allowed_prefixes` plus what the application trusts: HPDSL_TRUSTED and its pyproject."""
    from_env = [p.strip() for p in os.environ.get(TRUSTED_VARIABLE, "").split(",") if p.strip()]
    return (*allowed_prefixes, *from_env, *_pyproject_trusted(Path.cwd()))


def _pyproject_trusted(start: Path) -> tuple[str, ...]:
    """Return `[tool.hpdsl] trusted` of the application's pyproject.toml (none if absent or unreadable).

    The application's is the nearest pyproject.toml with a `[tool.hpdsl]` table at or above
    `start`, the one the CLI reads (hpdsl/cli/project.py), so a library run from a subfolder
    of the project trusts what `hpdsl train` run there trusts.
    """
    for folder in (start, *start.parents):
        table = _hpdsl_table(folder / "pyproject.toml")
        if table is not None:
            trusted = table.get("trusted", [])
            return tuple(p for p in trusted if isinstance(p, str)) if isinstance(trusted, list) else ()
    return ()


def _hpdsl_table(path: Path) -> dict[str, Any] | None:
    """Return the `[tool.hpdsl]` table of a pyproject.toml; None if absent, unreadable or without one."""
    try:
        toml: Any = importlib.import_module("tomllib")  # Python 3.11+; 3.10 reads no pyproject
        data = toml.loads(path.read_text(encoding="utf-8"))
    except (ImportError, OSError, UnicodeDecodeError, ValueError):  # TOMLDecodeError is a ValueError
        return None
    tool = data.get("tool") if isinstance(data, dict) else None
    table = tool.get("hpdsl") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else None


def import_variant(path: str, allowed_prefixes: Sequence[str], *, where: str) -> Callable[..., Any]:
    """Import the nn.Module class `module:Class` names; raise ResolutionError if untrusted or not one.

    The module is imported only under a trusted prefix (the allowed prefixes, HPDSL_TRUSTED,
    `[tool.hpdsl] trusted`); the class is looked up by one name, never an attribute walk, and
    must be an nn.Module subclass defined in that module (or below it) before anything is called.
    """
    if factory_problem(path) is not None:
        raise ResolutionError(f"{where}: import path '{path}' must have the form 'package.module:Name'")
    trusted = trusted_prefixes(allowed_prefixes)
    if not is_allowed(path, trusted):
        allowed = ", ".join(f"'{p}'" for p in trusted)
        raise ResolutionError(
            f"{where}: factory '{path}' is outside the trusted prefixes ({allowed}); to allow it, "
            f"pass allowed_prefixes, list its package in `[tool.hpdsl] trusted` of the application's "
            f"pyproject.toml, or in the {TRUSTED_VARIABLE} environment variable")
    try:
        return _import(path)
    except ImportError as exc:
        raise ResolutionError(f"{where}: cannot import '{path}': {exc}") from None


@functools.lru_cache(maxsize=None)
def _import(path: str) -> Callable[..., Any]:
    module_name, _, attribute = path.partition(":")
    module = importlib.import_module(module_name)
    value = vars(module).get(attribute)  # one name in the module's namespace: no attribute walk
    if value is None:
        raise ImportError(f"'{module_name}' has no attribute '{attribute}'")
    if not (isinstance(value, type) and issubclass(value, nn.Module)):
        raise ImportError(f"'{attribute}' is a {type(value).__name__}, not a torch nn.Module class")
    defined = value.__module__
    if defined != module_name and not defined.startswith(module_name + "."):
        raise ImportError(f"'{attribute}' is defined in '{defined}', not in '{module_name}'")
    return value


@functools.lru_cache(maxsize=None)
def explicit_parameters(constructor: Callable[..., Any]) -> tuple[str, ...]:
    """Return the parameters a constructor names (keywords it can be called with), cached."""
    return tuple(name for name, p in signature_of(constructor).parameters.items() if p.kind in _EXPLICIT)


@functools.lru_cache(maxsize=None)
def signature_of(constructor: Callable[..., Any]) -> inspect.Signature:
    """Return a constructor's signature, cached (resolution runs once per layer)."""
    return inspect.signature(constructor)


def _check_constructor(constructor: Callable[..., Any], variant: VariantIR,
                       extras: Mapping[str, Any], where: str) -> None:
    named = explicit_parameters(constructor)
    if "config" not in named and "module" not in named:
        raise ResolutionError(f"{where}: {_qualified(constructor)} must explicitly accept "
                              "'config' (direct build) or 'module' (replacement)")
    unknown = sorted(n for n in extras if n not in named or n not in variant.accepts)
    if unknown:
        accepted = sorted(set(variant.accepts) & set(named))
        raise ResolutionError(f"{where}: unknown arguments {unknown} for {_qualified(constructor)}; "
                              f"it accepts {accepted}")
    try:
        signature_of(constructor).bind_partial(**extras)
    except TypeError as exc:
        raise ResolutionError(f"{where}: {_qualified(constructor)} cannot take {sorted(extras)}: {exc}") \
            from None


def _qualified(constructor: Callable[..., Any]) -> str:
    module = getattr(constructor, "__module__", "?")
    return f"{module}:{getattr(constructor, '__qualname__', repr(constructor))}"


__all__ = ["DEFAULT_PREFIXES", "RUNTIME_ARGUMENTS", "FamilyRequest", "ResolvedFamily", "check_selector",
           "describe", "explicit_parameters", "import_variant", "is_allowed", "resolve_family",
           "signature_of", "trusted_prefixes"]
