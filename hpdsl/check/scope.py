"""The symbol table of one compilation: every top-level declaration by name.

Building it reports duplicates; the other checks look names up here. It also
answers the questions several checks share (a profile's kinds, flavours and
default), so each is computed one way.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from hpdsl import ast
from hpdsl.diagnostics import Collector, Note


@attrs.frozen
class Scope:
    """Declarations of all files in scope; the first of duplicate names wins."""

    files: tuple[ast.File, ...]
    vocabulary: ast.Vocabulary | None
    profiles: dict[str, ast.Profile]
    families: dict[str, ast.Family]
    models: dict[str, ast.Model]

    @property
    def op_names(self) -> tuple[str, ...]:
        """Return the vocabulary's op names in declaration order (empty without one)."""
        if self.vocabulary is None:
            return ()
        return tuple(dict.fromkeys(op.name.value for op in self.vocabulary.ops))


def build_scope(files: Sequence[ast.File], collector: Collector) -> Scope:
    """Index the declarations of `files`, reporting duplicate names."""
    vocabulary: ast.Vocabulary | None = None
    profiles: dict[str, ast.Profile] = {}
    families: dict[str, ast.Family] = {}
    models: dict[str, ast.Model] = {}
    tables: dict[type, dict[str, Any]] = {ast.Profile: profiles, ast.Family: families, ast.Model: models}
    codes = {ast.Profile: "duplicate-profile", ast.Family: "duplicate-family",
             ast.Model: "duplicate-model"}
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
            elif isinstance(item, (ast.Profile, ast.Family, ast.Model)):
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
    return Scope(tuple(files), vocabulary, profiles, families, models)


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


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """Return a hint naming the closest candidates, or listing them all."""
    options = sorted(set(candidates))
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    if not options:
        return "none are declared"
    shown = ", ".join(f"'{o}'" for o in options[:12])
    return f"expected one of {shown}" + (", ..." if len(options) > 12 else "")


# --------------------------------------------------------------------------
# Profile questions shared by the checks
# --------------------------------------------------------------------------


def profile_kinds(profile: ast.Profile) -> dict[str, ast.Kind]:
    """Return the profile's kinds by name, first declaration winning."""
    kinds: dict[str, ast.Kind] = {}
    for item in profile.items:
        if isinstance(item, ast.Kind):
            kinds.setdefault(item.name.value, item)
    return kinds


def profile_default(profile: ast.Profile) -> str | None:
    """Return the default kind: the stated one, else the only kind, else None."""
    for item in profile.items:
        if isinstance(item, ast.DefaultKind):
            return item.kind.value
    kinds = profile_kinds(profile)
    return next(iter(kinds)) if len(kinds) == 1 else None


def kind_lineage(kind: ast.Kind, kinds: dict[str, ast.Kind]) -> list[ast.Kind]:
    """Return the kind and its ancestors, nearest first, stopping at a cycle or unknown base."""
    chain = [kind]
    seen = {kind.name.value}
    while chain[-1].base is not None:
        base = kinds.get(chain[-1].base.value)
        if base is None or base.name.value in seen:
            break
        seen.add(base.name.value)
        chain.append(base)
    return chain


def kind_flavours(kind: ast.Kind, kinds: dict[str, ast.Kind]) -> tuple[str, str | None]:
    """Return (attention, ffn) of a kind, inherited from its bases when it states none."""
    attention: str | None = None
    ffn: str | None = None
    for ancestor in kind_lineage(kind, kinds):
        for item in ancestor.items:
            if attention is None and isinstance(item, ast.AttentionFlavour):
                attention = item.value.value
            if ffn is None and isinstance(item, ast.FfnFlavour):
                ffn = item.value.value
    return attention or "full", ffn


def kind_vector(kind: ast.Kind, kinds: dict[str, ast.Kind]) -> dict[str, ast.OpCount]:
    """Return the op counts a kind has: its bases' overlaid by its own, by op name."""
    vector: dict[str, ast.OpCount] = {}
    for ancestor in reversed(kind_lineage(kind, kinds)):
        for item in ancestor.items:
            if isinstance(item, ast.OpsBlock):
                for count in item.counts:
                    vector[count.op.value] = count
    return vector
