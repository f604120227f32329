"""Building the symbol table of one compilation: every top-level declaration by name.

Building it reports duplicates; the other checks look names up in the Scope
(hpdsl/scope.py, with the profile questions they share).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hpdsl import ast
from hpdsl.diagnostics import Collector, Note
from hpdsl.scope import Scope


def build_scope(files: Sequence[ast.File], collector: Collector) -> Scope:
    """Index the declarations of `files`, reporting duplicate names."""
    vocabulary: ast.Vocabulary | None = None
    profiles: dict[str, ast.Profile] = {}
    families: dict[str, ast.Family] = {}
    models: dict[str, ast.Model] = {}
    devices: dict[str, ast.Device] = {}
    clusters: dict[str, ast.Cluster] = {}
    tables: dict[type, dict[str, Any]] = {ast.Profile: profiles, ast.Family: families, ast.Model: models,
                                          ast.Device: devices, ast.Cluster: clusters}
    codes = {ast.Profile: "duplicate-profile", ast.Family: "duplicate-family",
             ast.Model: "duplicate-model", ast.Device: "duplicate-device", ast.Cluster: "duplicate-cluster"}
    for file in files:
        for item in file.items:
            if isinstance(item, ast.Vocabulary):
                if vocabulary is None:
                    vocabulary = item
                else:
                    collector.error(item.span, "duplicate-vocabulary",
                                    "a second op vocabulary is declared; only one may be in scope",
                                    hint="remove this one, or compile with --no-stdlib to replace "
                                         "the standard vocabulary",
                                    notes=(Note(vocabulary.span, "the first vocabulary"),))
            elif isinstance(item, (ast.Profile, ast.Family, ast.Model, ast.Device, ast.Cluster)):
                table = tables[type(item)]
                name = item.name.value
                if name in table:
                    what = codes[type(item)].removeprefix("duplicate-")
                    collector.error(item.name.span, codes[type(item)],
                                    f"{what} '{name}' is declared twice",
                                    hint=f"rename one of them; names of {what}s are global "
                                         "across all files in scope",
                                    notes=(Note(table[name].name.span, "first declared here"),))
                else:
                    table[name] = item
    if vocabulary is not None:
        report_duplicates(((op.name.value, op.name) for op in vocabulary.ops), collector,
                          "duplicate-op", "op")
    return Scope(tuple(files), vocabulary, profiles, families, models, devices, clusters)


def report_duplicates(named: Iterable[tuple[str, ast.Name]], collector: Collector, code: str,
                      what: str) -> None:
    """Report every repeat of a name among `named` under `code`."""
    seen: dict[str, ast.Name] = {}
    for key, node in named:
        if key in seen:
            collector.error(node.span, code, f"{what} '{key}' is declared twice",
                            hint=f"remove or rename the second {what}",
                            notes=(Note(seen[key].span, "first declared here"),))
        else:
            seen[key] = node
