"""The inline forms of .hpf text: literals, conditions, stack lists, layout dims and placements.

Each is written with the fewest parentheses that parse back to the same AST
(the grammar flattens `a and b and c` into one AllOf, so a nested AllOf keeps
its parentheses). hpdsl.fmt lays statements out with these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hpdsl import ast
from hpdsl.syntax.text import quote

# Binding strength of condition nodes, loosest first (the grammar's precedence).
_PREC: dict[type, int] = {ast.Implies: 0, ast.AnyOf: 1, ast.AllOf: 2, ast.Negation: 3}
_ATOM = 4



def format_literal(literal: ast.Literal) -> str:
    """Return a literal as .hpf text that parses back to the same value and kind."""
    if literal.kind == "string":
        return quote(str(literal.value))
    if literal.kind == "bool":
        return "true" if literal.value else "false"
    if literal.kind == "float":
        return _float(float(literal.value))
    return str(int(literal.value))


def _scientific(value: float) -> str:
    """Return the shortest `M.De±X` text that reads back as `value` (no zeros padding the exponent)."""
    for digits in range(1, 18):
        text = f"{value:.{digits}e}"
        if float(text) == value:
            break
    mantissa, _, exponent = text.partition("e")
    mantissa = mantissa.rstrip("0")
    # The exponent signed, as repr writes it from 1e16 on: 3.35e+12.
    return (mantissa + "0" if mantissa.endswith(".") else mantissa) + f"e{int(exponent):+d}"


def _float(value: float) -> str:
    if math.isnan(value):
        raise ValueError("NaN has no .hpf literal")
    if math.isinf(value):
        # Overflows back to infinity when read: the grammar has no `inf`.
        return "1.0e999" if value > 0 else "-1.0e999"
    if abs(value) >= 1e9:  # bandwidths and FLOP/s read as 3.35e+12, not 3350000000000.0
        return _scientific(value)
    # The grammar's FLOAT needs digits on both sides of the dot: 1e-05 -> 1.0e-05.
    mantissa, sep, exponent = repr(value).partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + (sep + exponent if sep else "")


def format_operand(value: ast.Literal | ast.Name) -> str:
    """Return the right-hand side of a comparison or a selector default as written."""
    return value.value if isinstance(value, ast.Name) else format_literal(value)


def format_expr(expr: ast.Expr) -> str:
    """Return a condition with the fewest parentheses that parse back to the same AST."""
    if isinstance(expr, ast.Implies):
        return f"{_sub(expr.premise, 1)} -> {_sub(expr.conclusion, 1)}"
    if isinstance(expr, ast.AnyOf):
        # An AnyOf directly inside an AnyOf keeps its parentheses: `a or b or c` is flat.
        return " or ".join(_sub(e, 2) for e in expr.operands)
    if isinstance(expr, ast.AllOf):
        return " and ".join(_sub(e, 3) for e in expr.operands)
    if isinstance(expr, ast.Negation):
        return "not " + _sub(expr.operand, 3)
    if isinstance(expr, ast.Reference):
        return expr.name.value
    if isinstance(expr, ast.Constant):
        return "true" if expr.value else "false"
    if isinstance(expr, ast.Comparison):
        return f"{expr.left.value} {expr.op} {format_operand(expr.right)}"
    if isinstance(expr, ast.Membership):
        return f"{expr.left.value} in ({', '.join(format_operand(v) for v in expr.values)})"
    raise TypeError(f"not a condition node: {expr!r}")


def _sub(expr: ast.Expr, least: int) -> str:
    text = format_expr(expr)
    return text if _PREC.get(type(expr), _ATOM) >= least else f"({text})"


def format_stack_list(stack: ast.StackList) -> str:
    """Return a stack list as `[linear_attention * 3, full_attention] * 12`."""
    items = ", ".join(format_stack_list(i) if isinstance(i, ast.StackList) else _stack_kind(i)
                      for i in stack.items)
    return f"[{items}]" + _repeat(stack.repeat)


def _stack_kind(kind: ast.StackKind) -> str:
    return kind.kind.value + _repeat(kind.repeat)


def _repeat(repeat: ast.Literal | None) -> str:
    return "" if repeat is None else f" * {format_literal(repeat)}"


def format_dim(expr: ast.DimExpr) -> str:
    """Return a dims expression with the fewest parentheses that parse back to the same AST."""
    if isinstance(expr, ast.Literal):
        return format_literal(expr)
    if isinstance(expr, ast.Name):
        return expr.value
    if isinstance(expr, ast.DimSum):
        # A sum directly inside a sum keeps its parentheses: `a + b + c` is flat.
        return " + ".join(_dim_operand(t, ast.DimSum) for t in expr.terms)
    text = " * ".join(_dim_operand(f, (ast.DimSum, ast.DimProduct)) for f in expr.factors)
    return text + "".join(f" / {_dim_operand(d, (ast.DimSum, ast.DimProduct))}" for d in expr.divisors)


def _dim_operand(expr: ast.DimExpr, grouped: type | tuple[type, ...]) -> str:
    text = format_dim(expr)
    return f"({text})" if isinstance(expr, grouped) else text


def format_dims(dims: Sequence[ast.DimExpr]) -> str:
    """Return a layout entry's dims as `(a, b * c)`."""
    return f"({', '.join(format_dim(d) for d in dims)})"


def format_weight(rule: ast.HfWeight) -> str:
    """Return a `weight` rule: `weight "a." -> "b."`, or its split's parts, sizes and groups, `transposed` last."""
    split = rule.split
    if split is None:
        target = format_literal(rule.target)
    else:
        target = (f"split({', '.join(format_literal(t) for t in split.targets)}) by {format_dims(split.sizes)}"
                  + ("" if split.groups is None else f" interleaved {format_dim(split.groups)}"))
    source = f"join({', '.join(format_literal(s) for s in rule.join)})" if rule.join else format_literal(rule.source)
    return f"weight {source} -> {target}" + (" transposed" if rule.transposed else "")


def format_placement(placement: ast.Placement) -> str:
    """Return a placement as `colwise` or `colwise(2)`."""
    dim = "" if placement.dim is None else f"({format_literal(placement.dim)})"
    return placement.name.value + dim


def format_selector_type(type_: ast.SelectorType) -> str:
    """Return a selector type as it is written: bool, int, int(1..8), enum(a, b)."""
    if isinstance(type_, ast.BoolType):
        return "bool"
    if isinstance(type_, ast.IntType):
        if type_.low is None or type_.high is None:
            return "int"
        return f"int({format_literal(type_.low)}..{format_literal(type_.high)})"
    return f"enum({', '.join(v.value for v in type_.values)})"


def format_field_decl(node: ast.FieldDecl) -> tuple[str, str]:
    """Return a field declaration as it is written: everything before its meaning, and the meaning."""
    type_ = node.type.kind if isinstance(node.type, ast.ScalarType) else format_selector_type(node.type)
    parts = [f"field {node.name.value}: {type_}"]
    parts += [f"{bound.op} {format_literal(bound.value)}" for bound in node.bounds]
    if node.block is not None:
        parts.append(f"in {node.block.value}")
    if node.required:
        parts.append("required")
    elif node.default is not None:
        parts.append("= " + format_operand(node.default))
    if node.hf:
        parts.append(f"hf({', '.join(key.value for key in node.hf)})")
    return " ".join(parts), format_literal(node.meaning)
