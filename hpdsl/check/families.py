"""Family ASTs into diagnostics: statements, selectors, condition types, variants, coverage.

A family is judged by the contract in hpdsl/ir/conditions.py: `parallel` is
true iff the family axis has size > 1, tp/cp/ep/pp are axis sizes, a `when`
variant matches when its condition holds, the one `default` variant matches
"otherwise" (or when its own `when` holds), and over the assignments every
require allows exactly one variant must match. That last property is proved by
hpdsl/check/coverage.py (which also reports it), only for a family with no
other error, so its counterexamples are never about a malformed rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import attrs

from hpdsl import ast
from hpdsl.check.coverage import family_items, report_coverage
from hpdsl.check.scope import report_duplicates
from hpdsl.diagnostics import Collector, Note, Span, did_you_mean
from hpdsl.fmt.inline import format_selector_type
from hpdsl.scope import Scope
from hpdsl.model.axes import CONDITION_AXES as AXES
from hpdsl.model.fields import FIELDS

RESERVED = (*AXES, "parallel")
"""Names a selector may not take: conditions read them as axis sizes and the parallel flag."""

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
IMPORT_PATH = re.compile(rf"{_IDENT}(\.{_IDENT})*:{_IDENT}\Z")
"""`package.module:Name`; a top-level module (`module:Name`) is a valid import too."""

_ORDERING = ("<", "<=", ">", ">=")


def check_families(scope: Scope, collector: Collector) -> None:
    """Report every problem with the families in scope."""
    for file in scope.files:
        for item in file.items:
            # Every declaration, duplicates included: one run reports every problem.
            if isinstance(item, ast.Family):
                check_family(item, collector)


def check_family(family: ast.Family, collector: Collector) -> None:
    """Report every problem with one family; prove its coverage when nothing else is wrong."""
    before = _errors(collector)
    _check_statements(family, collector)
    selectors = _check_selectors(family, collector)
    names = _Names(selectors, any(isinstance(i, ast.ParallelAxis) for i in family.items), collector)
    for item in family.items:
        if isinstance(item, ast.Require):
            names.check(item.condition)
        elif isinstance(item, ast.Variant) and item.when is not None:
            names.check(item.when)
    _check_variants(family, collector)
    if _errors(collector) == before:
        report_coverage(family, collector)


def _errors(collector: Collector) -> int:
    return sum(d.is_error for d in collector.diagnostics)


# --------------------------------------------------------------------------
# factory, parallel, import paths
# --------------------------------------------------------------------------


def _check_statements(family: ast.Family, collector: Collector) -> None:
    factories: list[ast.Factory] = family_items(family, ast.Factory)
    axes: list[ast.ParallelAxis] = family_items(family, ast.ParallelAxis)
    if not factories:
        collector.error(family.name.span, "missing-factory",
                        f"family '{family.name.value}' names no factory",
                        hint='add `factory "package.module:Name"`, the public callable it builds')
    for statements, what in ((factories, "factory"), (axes, "parallel")):
        for extra in statements[1:]:
            collector.error(extra.span, "duplicate-statement",
                            f"a family states '{what}' once, but this is a second '{what}' line",
                            hint="remove one of them",
                            notes=(Note(statements[0].span, f"the first '{what}' line"),))
    for factory in factories:
        check_import_path(factory.path, "factory", collector)
    for axis in axes:
        if axis.axis.value not in AXES:
            collector.error(axis.axis.span, "unknown-axis",
                            f"'{axis.axis.value}' is not a mesh axis; expected tp, cp, ep, pp or etp",
                            hint=did_you_mean(axis.axis.value, AXES))


def check_import_path(path: ast.Literal, what: str, collector: Collector) -> None:
    """Report a factory or variant path that is not `package.module:Name`."""
    if not IMPORT_PATH.match(str(path.value)):
        collector.error(path.span, "invalid-import-path",
                        f'the {what} path "{path.value}" is not of the form "package.module:Name"',
                        hint='write the module\'s dotted import path, a colon, and the name '
                             'defined in it, e.g. "hpdsl.torch.modules:Attention"')


# --------------------------------------------------------------------------
# selectors
# --------------------------------------------------------------------------


def _check_selectors(family: ast.Family, collector: Collector) -> dict[str, ast.Selector]:
    table: dict[str, ast.Selector] = {}
    for selector in family_items(family, ast.Selector):
        name = selector.name
        _check_selector_type(selector, collector)
        if name.value in RESERVED:
            collector.error(name.span, "reserved-name",
                            f"a selector cannot be named '{name.value}': conditions read that "
                            "name as " + ("the parallel flag" if name.value == "parallel"
                                          else "the size of a mesh axis"),
                            hint="rename the selector")
        elif name.value in table:
            collector.error(name.span, "duplicate-selector",
                            f"selector '{name.value}' is declared twice",
                            hint="remove or rename the second selector",
                            notes=(Note(table[name.value].name.span, "first declared here"),))
        else:
            table[name.value] = selector
            _check_follows_field(selector, collector)
    return table


def _check_follows_field(selector: ast.Selector, collector: Collector) -> None:
    """Warn when a selector named like a model field cannot take its values (it would never follow it).

    Selectors named like a field follow the slot's value in the build and the strategy
    checks (hpdsl.model.axes.config_selectors), bool for a bool field, an enum
    member for a choice; a require over one that cannot follow judges its default.
    """
    field = FIELDS.get(selector.name.value)
    if field is None:
        return
    type_ = selector.type
    if field.type == "bool" and not isinstance(type_, ast.BoolType):
        problem = "a bool"
    elif field.type == "choice" and not isinstance(type_, ast.EnumType):
        problem = f"an enum of {', '.join(field.choices)}"
    elif field.type == "choice" and isinstance(type_, ast.EnumType):
        missing = [c for c in field.choices if c not in {v.value for v in type_.values}]
        if not missing:
            return
        problem = f"an enum with {', '.join(missing)} too"
    elif field.type not in ("bool", "choice"):
        collector.warning(selector.name.span, "selector-field-type",
                          f"selector '{selector.name.value}' is named like the model field '{field.name}' "
                          f"({field.type}), but selectors follow only bool and choice fields: it never "
                          "follows the model, and a require over it judges its default",
                          hint="rename the selector")
        return
    else:
        return
    collector.warning(selector.name.span, "selector-field-type",
                      f"selector '{selector.name.value}' is named like the model field "
                      f"'{field.name}' ({field.type}), so it follows the model's value, but "
                      f"as declared it cannot take every value: it needs to be {problem}",
                      hint="declare it with the field's type, or rename it")


def _check_selector_type(selector: ast.Selector, collector: Collector) -> None:
    type_ = selector.type
    if (isinstance(type_, ast.IntType) and type_.low is not None and type_.high is not None
            and not _range_ok(type_)):
        collector.error(type_.span, "invalid-int-range",
                        f"the range {type_.low.value}..{type_.high.value} is empty: its low end "
                        "is above its high end",
                        hint=f"write int({type_.high.value}..{type_.low.value})")
    if isinstance(type_, ast.EnumType):
        report_duplicates(((v.value, v) for v in type_.values), collector,
                          "duplicate-enum-value", "enum value")
    default = selector.default
    if default is not None and not _default_ok(type_, default):
        collector.error(default.span, "selector-default-type",
                        f"the default {_describe(default)} of selector '{selector.name.value}' is "
                        f"not a value of its type {format_selector_type(type_)}",
                        hint=_default_hint(type_))


def _range_ok(type_: ast.IntType) -> bool:
    return type_.low is None or type_.high is None or int(type_.low.value) <= int(type_.high.value)


def _default_ok(type_: ast.SelectorType, default: ast.Literal | ast.Name) -> bool:
    if isinstance(type_, ast.BoolType):
        return isinstance(default, ast.Literal) and default.kind == "bool"
    if isinstance(type_, ast.EnumType):
        return _enum_member(type_, default)
    if not isinstance(default, ast.Literal) or default.kind != "int":
        return False
    inside = (type_.low is None or type_.high is None
              or int(type_.low.value) <= int(default.value) <= int(type_.high.value))
    return inside or not _range_ok(type_)


def _enum_member(type_: ast.EnumType, operand: ast.Literal | ast.Name,
                 members: frozenset[str] | None = None) -> bool:
    # An enum value is written as a name; a string naming a member means the same.
    textual = isinstance(operand, ast.Name) or operand.kind == "string"
    return textual and operand.value in (members if members is not None else {v.value for v in type_.values})


def _values(type_: ast.EnumType) -> list[str]:
    return list(dict.fromkeys(v.value for v in type_.values))


def _default_hint(type_: ast.SelectorType) -> str:
    if isinstance(type_, ast.BoolType):
        return "write `= true` or `= false`"
    if isinstance(type_, ast.EnumType):
        return "write one of the enum's values: " + ", ".join(_values(type_))
    if type_.low is None or type_.high is None:
        return "write a whole number"
    return f"write a whole number from {type_.low.value} to {type_.high.value}"


def _kind_of(type_: ast.SelectorType) -> str:
    if isinstance(type_, ast.BoolType):
        return "bool"
    return "enum" if isinstance(type_, ast.EnumType) else "int"


def _describe(node: ast.Literal | ast.Name) -> str:
    if isinstance(node, ast.Name):
        return f"name '{node.value}'"
    if node.kind == "string":
        return f'string "{node.value}"'
    if node.kind == "bool":
        return "bool " + ("true" if node.value else "false")
    return f"{'int' if node.kind == 'int' else 'number'} {node.value}"


# --------------------------------------------------------------------------
# condition types
# --------------------------------------------------------------------------


@attrs.frozen
class _Names:
    """Resolves and type-checks the names of one family's conditions."""

    selectors: dict[str, ast.Selector]
    has_axis: bool
    collector: Collector
    # Each enum's members, built once: an `in` list of k values against a k-value enum stays linear.
    members: dict[str, frozenset[str]] = attrs.field(factory=dict)

    def check(self, expr: ast.Expr) -> None:
        """Report every unknown name and type mismatch in one condition."""
        for node in _walk(expr):
            if isinstance(node, ast.Reference):
                self._check_reference(node.name)
            elif isinstance(node, ast.Comparison):
                self._check_comparison(node.left, node.op, (node.right,), node.span)
            elif isinstance(node, ast.Membership):
                self._check_comparison(node.left, "==", node.values, node.span)

    def kind(self, name: ast.Name) -> str | None:
        """Return bool/int/enum/axis/parallel for a known name; report and return None otherwise."""
        if name.value == "parallel":
            if self.has_axis:
                return "parallel"
            self.collector.error(name.span, "parallel-without-axis",
                                 "the condition reads 'parallel', but the family declares no "
                                 "parallel axis", hint="add `parallel tp` (or cp, ep, pp) to the family")
            return None
        if name.value in AXES:
            return "axis"
        selector = self.selectors.get(name.value)
        if selector is None:
            self.collector.error(name.span, "unknown-selector",
                                 f"'{name.value}' is neither a selector of this family, an axis "
                                 "nor 'parallel'",
                                 hint=did_you_mean(name.value, [*self.selectors, *RESERVED]))
            return None
        return _kind_of(selector.type)

    def _check_reference(self, name: ast.Name) -> None:
        kind = self.kind(name)
        if kind in (None, "bool", "parallel"):
            return
        example = f"{name.value} > 1" if kind == "axis" else f"{name.value} == {self._a_value(name)}"
        self.collector.error(name.span, "condition-type",
                             f"'{name.value}' is {_KIND_WORDS[kind]}, not a bool; a bare name in a "
                             "condition must be a bool selector or 'parallel'",
                             hint=f"compare it, e.g. `{example}`")

    def _a_value(self, name: ast.Name) -> str:
        type_ = self.selectors[name.value].type
        return type_.values[0].value if isinstance(type_, ast.EnumType) else "1"

    def _check_comparison(self, left: ast.Name, op: str, operands: tuple[ast.Literal | ast.Name, ...],
                          span: Span) -> None:
        kind = self.kind(left)
        if kind is None:
            return
        if op in _ORDERING and kind in ("bool", "parallel", "enum"):
            self.collector.error(span, "condition-type",
                                 f"'{op}' orders numbers, but '{left.value}' is {_KIND_WORDS[kind]}",
                                 hint="compare it with == or !=")
            return
        for operand in operands:
            problem = self._operand_problem(left, kind, operand)
            if problem is not None:
                self.collector.error(operand.span, "condition-type",
                                     f"'{left.value}' is {_KIND_WORDS[kind]} but is compared with "
                                     f"the {_describe(operand)}{problem[0]}", hint=problem[1])

    def _operand_problem(self, left: ast.Name, kind: str,
                         operand: ast.Literal | ast.Name) -> tuple[str, str] | None:
        if kind in ("bool", "parallel"):
            ok = isinstance(operand, ast.Literal) and operand.kind == "bool"
            return None if ok else ("", "compare it with true or false, or use it alone")
        if kind in ("int", "axis"):
            ok = isinstance(operand, ast.Literal) and operand.kind == "int"
            return None if ok else ("", "compare it with a whole number")
        type_ = self.selectors[left.value].type
        assert isinstance(type_, ast.EnumType)
        if left.value not in self.members:
            self.members[left.value] = frozenset(v.value for v in type_.values)
        if _enum_member(type_, operand, self.members[left.value]):
            return None
        values = _values(type_)
        if isinstance(operand, ast.Name):
            return (f", which is not one of its values ({', '.join(values)})",
                    did_you_mean(operand.value, values))
        return "", "compare it with one of its values: " + ", ".join(values)


_KIND_WORDS = {"bool": "a bool selector", "int": "an int selector", "enum": "an enum selector",
               "axis": "an axis size", "parallel": "the parallel flag (a bool)"}


def _walk(expr: ast.Expr) -> Iterator[ast.Expr]:
    # Preorder, left to right, with a stack (nested generators cost a frame per level per node).
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.Negation):
            stack.append(node.operand)
        elif isinstance(node, (ast.AllOf, ast.AnyOf)):
            stack.extend(reversed(node.operands))
        elif isinstance(node, ast.Implies):
            stack.append(node.conclusion)
            stack.append(node.premise)


# --------------------------------------------------------------------------
# variants
# --------------------------------------------------------------------------


def _check_variants(family: ast.Family, collector: Collector) -> None:
    variants: list[ast.Variant] = family_items(family, ast.Variant)
    if not variants:
        collector.error(family.name.span, "no-variants",
                        f"family '{family.name.value}' declares no variant",
                        hint='add `variant local "package.module:Name" default`')
        return
    report_duplicates(((v.name.value, v.name) for v in variants), collector,
                      "duplicate-variant", "variant")
    for variant in variants:
        check_import_path(variant.path, "variant", collector)
        report_duplicates(((a.value, a) for a in variant.accepts), collector,
                          "duplicate-argument", "accepted argument")
    defaults = [v for v in variants if v.is_default]
    if not defaults:
        collector.error(family.name.span, "no-default-variant",
                        f"family '{family.name.value}' marks no variant `default`",
                        hint="mark the baseline variant `default`; it is chosen when no other "
                             "variant's condition holds")
    for extra in defaults[1:]:
        collector.error(extra.name.span, "multiple-default-variants",
                        f"variant '{extra.name.value}' is marked default, but "
                        f"'{defaults[0].name.value}' already is",
                        hint="keep one default variant and give this one a `when` condition",
                        notes=(Note(defaults[0].name.span, "the first default variant"),))
