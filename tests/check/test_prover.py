"""The rule prover on families far past enumeration: exact verdicts, concrete counterexamples.

Speed is measured in bench/bench_prover.py, never here.
"""

from __future__ import annotations

from hpdsl.check.coverage import ENUMERATION_LIMIT, analyse_coverage, family_domain
from hpdsl.check.families import check_family
from hpdsl.diagnostics import Collector
from hpdsl.ir.conditions import matching_variants, violated_requires
from hpdsl.ir.lower_families import lower_family
from hpdsl.syntax import parse_text
from hpdsl import ast


def big_family(*, overlap: bool, gap: bool, bools: int = 30, size: int = 10_000) -> str:
    """Return a family with `bools` bool selectors, an enum of `size` values and an `in` list of `size` ints."""
    members = ", ".join(f"k{i}" for i in range(size))
    constants = ", ".join(str(3 * i) for i in range(size))
    lines = ["family big {", '  factory "pkg.mod:F"']
    lines += [f"  selector b{i}: bool" for i in range(bools)]
    lines += [f"  selector kind: enum({members}) = k0", f"  selector n: int(0..{3 * size}) = 0"]
    lines.append(f'  require n in ({constants}) or b0 "n must be listed"')
    lines.append(f"  variant fast \"pkg.mod:Fast\" when kind == k{size - 1} and b{bools - 1}")
    lines.append("  variant wide \"pkg.mod:Wide\" when " + " and ".join(f"b{i}" for i in range(1, bools - 1))
                 + (" and kind == k" + str(size - 1) if overlap else " and not b" + str(bools - 1)))
    lines.append("  variant slow \"pkg.mod:Slow\" when kind in (k1, k2) and n < 5 and not b1")
    lines.append('  variant plain "pkg.mod:Plain" default' + (" when kind == k3" if gap else ""))
    return "\n".join([*lines, "}"])


def _ir(text: str):  # type: ignore[no-untyped-def]
    family = parse_text(text).items[0]
    assert isinstance(family, ast.Family)
    return family, lower_family(family)


def test_big_family_overlap_and_gap_with_counterexamples() -> None:
    _, ir = _ir(big_family(overlap=True, gap=True))
    assert family_domain(ir).size > 2 ** 30 * ENUMERATION_LIMIT
    result = analyse_coverage(ir)
    assert result.unsatisfiable is None
    assert [(o.first, o.second) for o in result.overlaps] == [("fast", "wide")]
    for env in [result.overlaps[0].example, result.gap]:
        assert env is not None and not violated_requires(ir.requires, env)
    assert [v.name for v in matching_variants(ir.variants, result.overlaps[0].example)] == ["fast", "wide"]
    assert result.gap is not None and matching_variants(ir.variants, result.gap) == ()
    assert result.unreachable == ()


def test_big_family_without_findings_is_clean() -> None:
    family, ir = _ir(big_family(overlap=False, gap=False))
    result = analyse_coverage(ir)
    assert result.overlaps == () and result.gap is None and result.unreachable == ()
    collector = Collector()
    check_family(family, collector)
    assert [d.code for d in collector.sorted()] == []


def test_unsatisfiable_require_past_enumeration() -> None:
    text = big_family(overlap=False, gap=False, size=50).replace(
        '  variant fast', '  require not b0 and n == 1 "never"\n  variant fast')
    _, ir = _ir(text)
    assert analyse_coverage(ir).unsatisfiable == 1
