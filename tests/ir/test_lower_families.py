"""Lowering a family: the IR's source references name the file each family came from."""

from __future__ import annotations

from hpdsl import ast
from hpdsl.ir.lower_families import lower_family
from hpdsl.syntax import parse_text

FAMILY = 'family f {\n  factory "pkg.mod:F"\n  variant local "pkg.mod:F" default\n}\n'


def _family(text: str, name: str) -> ast.Family:
    found = [item for item in parse_text(text, name).items if isinstance(item, ast.Family)]
    return found[0]


def test_equal_families_from_two_files_keep_their_own_sources() -> None:
    # Spans are outside AST equality, so the two families are equal values; the
    # lowering is remembered, and must still not hand one file's sources to the other.
    first, second = _family(FAMILY, "a.hpf"), _family("\n\n" + FAMILY, "b.hpf")
    assert first == second
    lowered_first, lowered_second = lower_family(first), lower_family(second)
    assert lowered_first.source is not None and lowered_second.source is not None
    assert (lowered_first.source.file, lowered_first.source.line) == ("a.hpf", 1)
    assert (lowered_second.source.file, lowered_second.source.line) == ("b.hpf", 3)
    assert lower_family(first) is lowered_first  # remembered per AST object


def test_a_saved_term_lowers_with_its_unit_beside_the_flops_terms() -> None:
    text = ('family f {\n  factory "pkg.mod:F"\n  variant local "pkg.mod:F" default\n  cost {\n'
            '    flops scan = 2 * hidden\n    saved scan = 5 * hidden replicate if ssm_proj_bias\n  }\n}\n')
    costs = lower_family(_family(text, "f.hpf")).costs
    assert [(c.unit, c.name, c.replicated, c.condition is not None) for c in costs] == [
        ("flops", "scan", False, False), ("saved", "scan", True, True)]
    assert costs[1].source is not None and costs[1].source.line == 6
