"""The rule prover (hpdsl/check/prover.py) past enumeration, and beside enumeration, in one run.

1. The issue's family: 30 bool selectors, an enum of 10,000 values and an `in`
   list of 10,000 int constants (tests/check/test_prover.py writes it), once
   with an overlap and a gap, once clean. Times parse, lower + prove, and the
   whole `check_family` (every family check, coverage included); prints the
   counterexamples found. The target is the check (lower + prove) under 1 s.
2. Side by side, interleaved: enumeration and the prover on families of n bool
   selectors, n growing, while enumeration stays under a few seconds.

    .venv/bin/python bench/bench_prover.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "check"))

from test_prover import big_family  # noqa: E402

from hpdsl import ast  # noqa: E402
from hpdsl.check.coverage import (  # noqa: E402
    describe_assignment, enumerate_coverage, family_domain, prove_coverage, relevant_names,
)
from hpdsl.check.families import check_family  # noqa: E402
from hpdsl.diagnostics import Collector  # noqa: E402
from hpdsl.ir.lower_families import lower_family  # noqa: E402
from hpdsl.syntax import parse_text  # noqa: E402


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Return (seconds, result) of one call."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def family(text: str) -> ast.Family:
    """Parse one family."""
    item = parse_text(text).items[0]
    assert isinstance(item, ast.Family)
    return item


def chain(bools: int) -> str:
    """Return a family of `bools` bool selectors whose variants chain over them, with one overlap."""
    lines = ["family chain {", '  factory "pkg.mod:F"', *(f"  selector b{i}: bool" for i in range(bools))]
    lines += [f'  variant v{i} "pkg.mod:V" when b{i} and not b{i + 1}' for i in range(bools - 1)]
    lines += ['  variant last "pkg.mod:V" when b0 and b1', '  variant plain "pkg.mod:P" default']
    return "\n".join([*lines, "}"])


def big(repeat: int) -> None:
    """Time the issue's family, with and without findings."""
    print("30 bools, enum of 10,000 values, `in` list of 10,000 constants:")
    for findings in (True, False):
        text = big_family(overlap=findings, gap=findings)
        t_parse, item = timed(lambda: family(text))
        best_check, best_family = float("inf"), float("inf")
        for _ in range(repeat):
            t_check, result = timed(lambda: prove_coverage(ir := lower_family(item), family_domain(ir)))
            collector = Collector()
            t_family, _ = timed(lambda: check_family(item, collector))
            best_check, best_family = min(best_check, t_check), min(best_family, t_family)
        ir = lower_family(item)
        domain = family_domain(ir)
        print(f"  {'with' if findings else 'without'} overlap and gap: {domain.size:.3g} assignments; "
              f"parse {t_parse:.3f} s, lower + prove {best_check:.3f} s "
              f"({'under' if best_check < 1 else 'OVER'} 1 s), check_family {best_family:.3f} s "
              f"(codes: {', '.join(sorted({d.code for d in collector.diagnostics})) or 'none'})")
        for overlap in result.overlaps:
            names = relevant_names(ir, (overlap.first, overlap.second))
            print(f"    overlap {overlap.first}/{overlap.second}: {describe_assignment(overlap.example, names, domain)}")
        if result.gap is not None:
            print(f"    gap: {describe_assignment(result.gap, relevant_names(ir), domain)}")
        print(f"    unreachable: {', '.join(result.unreachable) or 'none'}")


def enum_in_list(repeat: int) -> None:
    """Time check_family on an enum of 10,000 values read through an `in` list of 5,000 of them."""
    values = [f"k{i}" for i in range(10_000)]
    text = (f'family f {{\n  factory "a.b:C"\n  selector kind: enum({", ".join(values)}) = k0\n'
            f'  variant a "a.b:A" when kind in ({", ".join(values[::2])})\n  variant b "a.b:B" default\n}}')
    item = family(text)
    best = min(timed(lambda: check_family(item, Collector()))[0] for _ in range(repeat))
    print(f"  enum of 10,000 values, `in` list of 5,000 of them: check_family {best:.3f} s")


def side_by_side(repeat: int) -> None:
    """Enumeration against the prover on growing chains, interleaved."""
    print(f"{'bools':>6}{'assignments':>13}{'enumerate s':>13}{'prove s':>10}{'ratio':>9}  same verdict")
    for bools in (8, 12, 14, 16):
        ir = lower_family(family(chain(bools)))
        domain = family_domain(ir)
        t_enum = t_prove = float("inf")
        for _ in range(repeat):
            te, enumerated = timed(lambda: enumerate_coverage(ir, domain))
            tp, proved = timed(lambda: prove_coverage(ir, domain))
            t_enum, t_prove = min(t_enum, te), min(t_prove, tp)
        print(f"{bools:>6}{domain.size:>13,}{t_enum:>13.4f}{t_prove:>10.4f}{t_enum / t_prove:>8.0f}x  "
              f"{enumerated == proved}")


def main() -> None:
    """Run both parts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    big(args.repeat)
    enum_in_list(args.repeat)
    side_by_side(args.repeat)


if __name__ == "__main__":
    main()
