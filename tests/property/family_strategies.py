"""Hypothesis strategies for small families, generated as .hpf text for the real parser.

Shared by the coverage properties (test_family_props.py) and the resolution
properties (test_resolve_props.py): a family drawn here has bool and enum
selectors, an optional parallel axis, requires and variants whose conditions
are built from every comparison form the language has.
"""

from __future__ import annotations

import attrs
from hypothesis import strategies as st

@attrs.frozen
class FamilySpec:
    """A generated family: its selectors, parallel axis, requires and variants."""

    bools: tuple[str, ...]
    enums: tuple[tuple[str, tuple[str, ...]], ...]
    axis: str | None
    requires: tuple[str, ...]
    variants: tuple[tuple[str, bool, str | None], ...]  # name, default, when
    defaults: tuple[tuple[str, str], ...] = ()  # selector, its default as written

    def text(self, path: str | None = None) -> str:
        """Return the family as .hpf source (every variant importing `path` when given)."""
        defaults = dict(self.defaults)
        lines = ["family prop {", '  factory "pkg.mod:Factory"']
        if self.axis:
            lines.append(f"  parallel {self.axis}")
        lines += [f"  selector {b}: bool{_default(defaults, b)}" for b in self.bools]
        lines += [f"  selector {e}: enum({', '.join(vs)}){_default(defaults, e)}" for e, vs in self.enums]
        lines += [f'  require {r} "require {i} fails"' for i, r in enumerate(self.requires)]
        for name, default, when in self.variants:
            mark = " default" if default else ""
            rule = f" when {when}" if when is not None else ""
            lines.append(f'  variant {name} "{path or "pkg.mod:" + name.upper()}"{mark}{rule}')
        return "\n".join([*lines, "}"])

    def axes(self) -> tuple[str, ...]:
        """Return the axes the conditions may compare."""
        return tuple(dict.fromkeys(["tp", *([self.axis] if self.axis else [])]))


def _atoms(bools: tuple[str, ...], enums: tuple[tuple[str, tuple[str, ...]], ...],
           axes: tuple[str, ...], axis: str | None) -> list[str]:
    atoms = ["true", "false"]
    for b in bools:
        atoms += [b, f"{b} == false"]
    for e, values in enums:
        atoms += [f"{e} == {v}" for v in values] + [f"{e} != {values[0]}",
                                                   f"{e} in ({values[0]}, {values[-1]})"]
    for a in axes:
        atoms += [f"{a} {op} {c}" for op in ("==", "!=", "<", "<=", ">", ">=") for c in range(4)]
        atoms.append(f"{a} in (1, 3)")
    if axis:
        atoms += ["parallel", "parallel"]  # weighted: the family flag is the common case
    return atoms


def _conditions(atoms: list[str]) -> st.SearchStrategy[str]:
    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        many = st.lists(children, min_size=2, max_size=3)
        return st.one_of(
            children.map(lambda c: f"not ({c})"),
            many.map(lambda cs: " and ".join(f"({c})" for c in cs)),
            many.map(lambda cs: " or ".join(f"({c})" for c in cs)),
            st.tuples(children, children).map(lambda t: f"({t[0]}) -> ({t[1]})"),
        )
    return st.recursive(st.sampled_from(atoms), extend, max_leaves=4)


@st.composite
def family_specs(draw: st.DrawFn) -> FamilySpec:
    """Draw a valid small family: every name known, every comparison well typed."""
    bools = tuple(f"b{i}" for i in range(draw(st.integers(1, 3))))
    enums = tuple((f"e{i}", tuple(f"v{j}" for j in range(draw(st.integers(2, 3)))))
                  for i in range(draw(st.integers(0, 2))))
    axis = draw(st.sampled_from([None, "tp", "ep", "cp"]))
    axes = tuple(dict.fromkeys(["tp", *([axis] if axis else [])]))
    condition = _conditions(_atoms(bools, enums, axes, axis))
    requires = tuple(draw(st.lists(condition, max_size=2)))
    count = draw(st.integers(1, 4))
    default = draw(st.integers(0, count - 1))
    variants = []
    for i in range(count):
        has_when = draw(st.booleans()) if i == default else draw(st.integers(0, 9)) > 0
        variants.append((f"v{i}", i == default, draw(condition) if has_when else None))
    return FamilySpec(bools, enums, axis, requires, tuple(variants))


def _default(defaults: dict[str, str], name: str) -> str:
    return f" = {defaults[name]}" if name in defaults else ""


@st.composite
def defaulted_family_specs(draw: st.DrawFn) -> FamilySpec:
    """Draw a family as family_specs does, with a default on every selector."""
    spec = draw(family_specs())
    defaults = [(b, draw(st.sampled_from(["false", "true"]))) for b in spec.bools]
    defaults += [(e, draw(st.sampled_from(values))) for e, values in spec.enums]
    return attrs.evolve(spec, defaults=tuple(defaults))
