"""Helpers of the golden tests: compare or rewrite, mask what varies, dump an AST, compile.

Golden files live under tests/golden/<stage>/ beside their small inputs;
`pytest --update-golden` rewrites them from the current output (review the diff).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from hpdsl.diagnostics import Diagnostic, Source
from hpdsl.ir.nodes import RegistryIR

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parents[1]

_DIFF_LINES = 60
_HASH = re.compile(r'"source_hash": "sha256:[0-9a-f]+"')
_INLINE_WIDTH = 100


# --------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------


def compare_golden(path: Path, actual: str, update: bool) -> None:
    """Compare `actual` with the golden file byte for byte, or rewrite it under --update-golden."""
    __tracebackhide__ = True  # the failure is the diff, not this function's source
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(actual.encode("utf-8"))
        return
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    assert path.exists(), f"{shown} is missing; run pytest --update-golden and review the new file"
    expected = path.read_bytes().decode("utf-8")
    if actual == expected:
        return
    diff = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                     f"{shown} (golden)", f"{shown} (now)", lineterm=""))
    more = len(diff) - _DIFF_LINES
    shown_diff = "\n".join(diff[:_DIFF_LINES]) + (f"\n... {more} more diff lines" if more > 0 else "")
    raise AssertionError(f"{shown} differs from the output; if the change is intended, run "
                         f"pytest --update-golden and review the diff:\n{shown_diff}")


def mask(text: str, *roots: Path) -> str:
    """Return `text` without what varies between runs: the source hash and absolute paths."""
    text = _HASH.sub('"source_hash": "sha256:<masked>"', text)
    for root in roots:
        text = text.replace(str(root.resolve()) + "/", "")
    return text


# --------------------------------------------------------------------------
# Dumping an AST
# --------------------------------------------------------------------------


def dump_ast(node: Any) -> str:
    """Return an indented dump of an AST: what equality compares, so no spans or file path."""
    return "\n".join(_dump_lines(node, "")) + "\n"


def _compared(node: Any) -> list[tuple[str, Any]]:
    return [(field.name, getattr(node, field.name)) for field in attrs.fields(type(node)) if field.eq]


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _inline(value: Any) -> str:
    if attrs.has(type(value)):
        fields = _compared(value)
        if all(_is_scalar(item) for _, item in fields):  # a leaf: Name('hidden'), Literal(64, 'int')
            return f"{type(value).__name__}({', '.join(repr(item) for _, item in fields)})"
        inner = ", ".join(f"{name}={_inline(item)}" for name, item in fields)
        return f"{type(value).__name__}({inner})"
    if isinstance(value, tuple):
        return "(" + ", ".join(_inline(item) for item in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _dump_lines(value: Any, indent: str) -> list[str]:
    # A node whose one-line form is short stays on one line; longer ones open up a
    # field (or tuple item) per line, so a changed statement changes few lines.
    line = _inline(value)
    if len(indent) + len(line) <= _INLINE_WIDTH or not (attrs.has(type(value)) or isinstance(value, tuple)):
        return [indent + line]
    if isinstance(value, tuple):
        lines = []
        for item in value:
            nested = _dump_lines(item, indent + "  ")
            lines += [indent + "- " + nested[0][len(indent) + 2:], *nested[1:]]
        return lines
    lines = [indent + type(value).__name__]
    for name, item in _compared(value):
        nested = _dump_lines(item, indent + "    ")
        if len(nested) == 1:
            lines.append(f"{indent}  {name}: {nested[0][len(indent) + 4:]}")
        else:
            lines += [f"{indent}  {name}:", *nested]
    return lines


# --------------------------------------------------------------------------
# Compiling: the one place the tests call the compile API
# --------------------------------------------------------------------------


@attrs.frozen
class Compiled:
    """What compiling gave: the registry (None on any error), every diagnostic, the sources."""

    registry: RegistryIR | None
    diagnostics: tuple[Diagnostic, ...]
    sources: dict[str, Source]


def compile_inputs(paths: Sequence[str | Path], *, stdlib: bool = False) -> Compiled:
    """Compile .hpf files and folders with hpdsl.api.check_paths (every diagnostic, never raising)."""
    from hpdsl.api import check_paths

    result = check_paths(list(paths), stdlib=stdlib)
    return Compiled(None if result.registry is None else result.registry.ir, result.diagnostics, result.sources)
