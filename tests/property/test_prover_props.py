"""The rule prover (hpdsl/check/prover.py) against enumeration, on small hypothesis families.

coverage.py judges a small domain over bit sets (masks.py) and proves a large
one; on every small family both, and enumeration, must give the same Coverage: the same unsatisfiable require, the
same overlaps in the same order with the same (first) counterexample, the same
gap and the same unreachable variants. Families are .hpf text through the real
parser; some carry an int selector compared with constants and `in` lists.
"""

from __future__ import annotations

from family_strategies import FamilySpec, family_specs
from hypothesis import given, settings
from hypothesis import strategies as st

from hpdsl import ast
from hpdsl.check.coverage import enumerate_coverage, family_domain, prove_coverage
from hpdsl.check.masks import mask_coverage
from hpdsl.ir.conditions import render_condition
from hpdsl.ir.lower_families import lower_family
from hpdsl.syntax import parse_text

_INT_ATOMS = ("n == 3", "n != 5", "n < 4", "n >= 6", "n in (2, 5, 7)", "n in (1, 3) or b0")


@st.composite
def families_with_ints(draw: st.DrawFn) -> str:
    """Return a generated family's text, sometimes with `n: int(0..9)` in a require or a `when`."""
    spec: FamilySpec = draw(family_specs())
    text = spec.text()
    if draw(st.booleans()):
        atom = draw(st.sampled_from(_INT_ATOMS))
        text = text.replace("  selector b0: bool", "  selector b0: bool\n  selector n: int(0..9) = 4", 1)
        variant = draw(st.integers(0, len(spec.variants)))
        lines = text.splitlines()
        if variant == len(spec.variants):
            lines.insert(-1, f'  require {atom} or b0 "n"')
        else:
            name = spec.variants[variant][0]
            lines = [f'{line} when {atom}' if line.startswith(f"  variant {name} ") and " when " not in line
                     else line for line in lines]
        text = "\n".join(lines)
    return text


@settings(max_examples=300, deadline=None)
@given(families_with_ints())
def test_prover_gives_the_enumerated_verdict(text: str) -> None:
    family = parse_text(text).items[0]
    assert isinstance(family, ast.Family)
    ir = lower_family(family)
    domain = family_domain(ir)
    assert prove_coverage(ir, domain) == enumerate_coverage(ir, domain)


@settings(max_examples=300, deadline=None)
@given(families_with_ints())
def test_bit_sets_give_the_enumerated_verdict(text: str) -> None:
    family = parse_text(text).items[0]
    assert isinstance(family, ast.Family)
    ir = lower_family(family)
    domain = family_domain(ir)
    assert mask_coverage(ir, domain) == enumerate_coverage(ir, domain)


@settings(max_examples=200, deadline=None)
@given(families_with_ints())
def test_lowered_text_is_the_rendering(text: str) -> None:
    # condition_from_ast writes the text while it builds the tree; render_condition walks the tree.
    family = parse_text(text).items[0]
    assert isinstance(family, ast.Family)
    ir = lower_family(family)
    for condition in [r.condition for r in ir.requires] + [v.when for v in ir.variants if v.when]:
        assert condition.text == render_condition(condition)
