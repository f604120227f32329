"""Family checks: the coverage analysis (domain, verdicts, counterexample text) and lowering.

The error codes themselves are pinned by tests/cases/families/*.hpf; these tests
pin the exact messages, the representative domain, and the standard families.
"""

from __future__ import annotations

import pytest

from hpdsl import ast
from hpdsl.check import check_files
from hpdsl.check.coverage import analyse_coverage, family_domain
from hpdsl.check.families import check_family
from hpdsl.diagnostics import Collector, Diagnostic, Source
from hpdsl.ir.conditions import matching_variants, violated_requires
from hpdsl.ir.lower_families import lower_family
from hpdsl.ir.nodes import FamilyIR, SelectorIR
from hpdsl.resources import stdlib_files
from hpdsl.syntax import parse_source, parse_text

HEAD = 'factory "pkg.mod:F"\n'


def family_ast(body: str, name: str = "f") -> ast.Family:
    """Parse one family whose body is `body` (a factory line is prepended)."""
    family = parse_text(f"family {name} {{\n{HEAD}{body.strip()}\n}}").items[0]
    assert isinstance(family, ast.Family)
    return family


def diagnose(body: str) -> list[Diagnostic]:
    collector = Collector()
    check_family(family_ast(body), collector)
    return list(collector.sorted())


def messages(body: str) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in diagnose(body)]


def domain_of(body: str) -> dict[str, tuple]:
    return {v.name: v.values for v in family_domain(lower_family(family_ast(body))).variables}


# --------------------------------------------------------------------------
# The representative domain
# --------------------------------------------------------------------------


def test_domain_holds_only_variables_the_conditions_read() -> None:
    body = """
      selector used: bool
      selector unused: int(1..4096) = 64
      variant local "pkg.mod:L" default
      variant x "pkg.mod:X" when used
    """
    assert domain_of(body) == {"used": (False, True)}


def test_int_representatives_are_ends_default_and_constants_with_neighbours() -> None:
    body = """
      selector chunk: int(1..4096) = 64
      variant local "pkg.mod:L" default
      variant big "pkg.mod:B" when chunk > 128
      variant top "pkg.mod:T" when chunk == 4096 and not (chunk > 128)
    """
    assert domain_of(body) == {"chunk": (1, 64, 127, 128, 129, 4095, 4096)}


def test_unranged_int_is_not_clipped_and_defaults_to_zero() -> None:
    body = """
      selector n: int
      variant local "pkg.mod:L" default
      variant neg "pkg.mod:N" when n < -2
    """
    assert domain_of(body) == {"n": (-3, -2, -1, 0)}


def test_axis_representatives_start_at_one_and_parallel_adds_two() -> None:
    body = """
      parallel ep
      selector flag: bool
      require flag -> ep in (1, 2) and tp == 1
      variant local "pkg.mod:L" default
      variant ep "pkg.mod:E" when parallel and not flag
    """
    assert domain_of(body) == {"flag": (False, True), "tp": (1, 2), "ep": (1, 2, 3)}
    assert domain_of('parallel cp\nvariant l "a:b" default\nvariant r "a:c" when parallel') == {
        "cp": (1, 2)}


def test_enum_domain_is_its_values_in_order() -> None:
    body = """
      selector mode: enum(eager, chunked, fused)
      variant local "pkg.mod:L" default
      variant x "pkg.mod:X" when mode != eager
    """
    assert domain_of(body) == {"mode": ("eager", "chunked", "fused")}


# --------------------------------------------------------------------------
# Verdicts and their exact messages
# --------------------------------------------------------------------------

OVERLAPPING = """
  parallel ep
  selector use_mxfp8: bool = false
  selector backend: enum(eager, chunked) = eager
  variant mxfp8 "pkg.mod:M" when use_mxfp8
  variant ep    "pkg.mod:E" when parallel
  variant local "pkg.mod:L" default
"""


def test_overlap_names_both_variants_with_a_counterexample() -> None:
    [found] = diagnose(OVERLAPPING)
    assert found.code == "variant-overlap"
    assert found.message == "use_mxfp8=true, ep=2 (parallel) matches both 'mxfp8' and 'ep'"
    assert (found.span.line, found.span.col) == (7, 11)
    assert [(n.span.line, n.message) for n in found.notes] == [(6, "'mxfp8' is declared here")]


def test_overlap_shows_only_the_variables_of_the_two_conditions() -> None:
    body = """
      parallel ep
      selector a: bool
      selector b: bool
      selector c: bool
      variant x "pkg.mod:X" when a and c
      variant y "pkg.mod:Y" when c or tp > 2
      variant z "pkg.mod:Z" when b and not c and not parallel and tp == 1
      variant local "pkg.mod:L" default
    """
    assert messages(body) == [("variant-overlap", "a=true, c=true, tp=1 matches both 'x' and 'y'")]


def test_the_upstream_shaped_example_is_clean() -> None:
    body = """
      parallel ep
      selector use_mxfp8: bool = false
      selector use_fused_mxfp8: bool = false
      selector backend: enum(eager, chunked) = eager
      selector chunk: int(1..4096) = 64
      require use_fused_mxfp8 -> use_mxfp8  "use_fused_mxfp8 requires use_mxfp8"
      require use_mxfp8 -> tp == 1 and cp == 1 and pp == 1  "MXFP8 experts require TP=CP=PP=1"
      variant mxfp8 "hpdsl.torch.modules:MXFP8GroupedExperts" when use_mxfp8 and not parallel
      variant ep    "hpdsl.torch.modules:ExpertParallelExperts" when parallel accepts(capacity)
      variant local "hpdsl.torch.modules:GroupedExperts"        default
    """
    assert diagnose(body) == []


def test_a_require_removes_an_overlap() -> None:
    body = OVERLAPPING.replace("variant mxfp8", 'require use_mxfp8 -> ep == 1\nvariant mxfp8')
    assert diagnose(body) == []


def test_gap_names_the_relevant_variables_and_not_parallel() -> None:
    body = """
      parallel tp
      selector mode: enum(a, b)
      selector other: bool
      require other -> tp == 1
      variant a "pkg.mod:A" default when mode == a and not parallel
      variant b "pkg.mod:B" when mode == b
    """
    assert messages(body) == [("variant-gap", "mode=a, tp=2 (parallel) matches no variant")]


def test_gap_with_constant_conditions_says_every_assignment() -> None:
    body = 'variant a "pkg.mod:A" default when false'
    assert messages(body) == [("variant-gap", "every allowed assignment matches no variant")]


def test_unreachable_is_a_warning_at_the_variant() -> None:
    body = """
      parallel tp
      selector flag: bool
      require flag -> tp == 1
      variant local "pkg.mod:L" default
      variant never "pkg.mod:N" when flag and parallel
    """
    [found] = diagnose(body)
    assert (found.code, found.severity, found.span.line) == ("variant-unreachable", "warning", 7)
    assert found.message == "no allowed assignment selects variant 'never'"


def test_unsatisfiable_points_at_the_require_that_empties_the_domain() -> None:
    body = """
      selector a: bool
      selector b: bool
      require a -> b
      require a
      require not b
      variant local "pkg.mod:L" default
    """
    [found] = diagnose(body)
    assert (found.code, found.span.line) == ("require-unsatisfiable", 7)
    assert found.message == ("'not b' holds for no assignment the requires before it allow, "
                             "so every request is rejected")
    assert [n.span.line for n in found.notes] == [5, 6]


def test_coverage_is_skipped_when_the_family_has_another_error() -> None:
    body = OVERLAPPING.replace("selector backend: enum(eager, chunked) = eager",
                               "selector backend: enum(eager, chunked) = lazy")
    assert [code for code, _ in messages(body)] == ["selector-default-type"]


def test_a_domain_past_the_limit_is_proved_not_skipped() -> None:
    ir = lower_family(family_ast(OVERLAPPING))
    assert analyse_coverage(ir, limit=3) == analyse_coverage(ir)
    assert analyse_coverage(ir).size == 4


def test_coverage_result_on_the_ir() -> None:
    result = analyse_coverage(lower_family(family_ast(OVERLAPPING)))
    assert [(o.first, o.second, dict(o.example)) for o in result.overlaps] == [
        ("mxfp8", "ep", {"use_mxfp8": True, "ep": 2, "parallel": True})]
    assert result.gap is None and result.unreachable == () and result.unsatisfiable is None


# --------------------------------------------------------------------------
# Lowering
# --------------------------------------------------------------------------


def test_lowering_fills_selector_defaults() -> None:
    ir = lower_family(family_ast("""
      selector b: bool
      selector e: enum(x, y)
      selector r: int(3..9)
      selector n: int
      selector s: enum(x, y) = y
      variant local "pkg.mod:L" default
    """))
    assert [(s.name, s.type, s.default) for s in ir.selectors] == [
        ("b", "bool", False), ("e", "enum", "x"), ("r", "int", 3), ("n", "int", 0),
        ("s", "enum", "y")]
    assert ir.selectors[2] == SelectorIR("r", "int", 3, low=3, high=9, source=ir.selectors[2].source)
    assert ir.selectors[1].values == ("x", "y")


def test_lowering_generates_missing_require_messages() -> None:
    ir = lower_family(family_ast('require tp==1 and cp==1\nrequire tp < 9 "small"\n'
                                 'variant local "pkg.mod:L" default'))
    assert [r.message for r in ir.requires] == ["requires tp == 1 and cp == 1", "small"]


def test_lowering_keeps_variants_conditions_and_sources() -> None:
    ir = lower_family(family_ast(OVERLAPPING))
    assert isinstance(ir, FamilyIR)
    assert (ir.name, ir.factory, ir.parallel) == ("f", "pkg.mod:F", "ep")
    assert [(v.name, v.default, v.when.text if v.when else None) for v in ir.variants] == [
        ("mxfp8", False, "use_mxfp8"), ("ep", False, "parallel"), ("local", True, None)]
    assert ir.variants[0].source is not None and ir.variants[0].source.line == 6
    assert ir.source is not None and ir.source.line == 1


def test_lowering_a_broken_family_does_not_raise() -> None:
    family = parse_text('family g { parallel dp\nselector a: bool\nselector a: int\n'
                        'variant v "x" accepts(p, p) }').items[0]
    ir = lower_family(family)  # type: ignore[arg-type]
    assert (ir.factory, ir.parallel, len(ir.selectors)) == ("", None, 1)
    assert ir.variants[0].accepts == ("p",)


# --------------------------------------------------------------------------
# The standard families
# --------------------------------------------------------------------------


def _standard_families() -> dict[str, FamilyIR]:
    families = {}
    for name, path in stdlib_files():
        if "/families/" in name:
            for item in parse_source(Source(name, path.read_text())).items:
                if isinstance(item, ast.Family):
                    families[item.name.value] = lower_family(item)
    return families


def test_the_standard_library_checks_clean() -> None:
    sources = [Source(name, path.read_text()) for name, path in stdlib_files()]
    _, diagnostics = check_files([parse_source(s) for s in sources])
    assert diagnostics == ()
    assert set(_standard_families()) >= {"attention", "grouped_experts", "gated_delta_net", "mlp"}


def _select(family: FamilyIR, **env: object) -> str:
    if family.parallel is not None:
        env["parallel"] = env.get(family.parallel, 1) > 1  # type: ignore[operator]
    [chosen] = matching_variants(family.variants, env)  # type: ignore[arg-type]
    return chosen.name


@pytest.mark.parametrize(("env", "variant"), [
    ({"use_mxfp8": False, "ep": 1}, "local"),
    ({"use_mxfp8": False, "ep": 4}, "ep"),
    ({"use_mxfp8": True, "ep": 1}, "mxfp8"),
    ({"use_mxfp8": True, "ep": 2}, "mxfp8"),
    ({"use_mxfp8": False, "ep": 1, "etp": 2}, "ep"),  # etp alone splits the experts' width
])
def test_grouped_experts_selection(env: dict, variant: str) -> None:
    family = _standard_families()["grouped_experts"]
    assert _select(family, use_fused_mxfp8=False, tp=1, cp=1, pp=1, **{"etp": 1, **env}) == variant


@pytest.mark.parametrize(("env", "message"), [
    ({"use_mxfp8": False, "use_fused_mxfp8": True}, "use_fused_mxfp8 requires use_mxfp8=True"),
    ({"use_mxfp8": True, "use_fused_mxfp8": True},
     "use_fused_mxfp8=True is not supported; use non-fused MXFP8"),
    ({"use_mxfp8": True, "use_fused_mxfp8": False, "tp": 2}, "MXFP8 experts require TP=CP=PP=1"),
    ({"use_mxfp8": True, "use_fused_mxfp8": False, "ep": 4},
     "MXFP8 experts support only EP=1 or EP=2"),
])
def test_grouped_experts_rejects_with_upstream_messages(env: dict, message: str) -> None:
    family = _standard_families()["grouped_experts"]
    full = {"tp": 1, "cp": 1, "pp": 1, "ep": 1, **env}
    assert violated_requires(family.requires, full)[0].message == message


def test_attention_goes_ring_under_context_parallelism() -> None:
    family = _standard_families()["attention"]
    assert (_select(family, cp=1), _select(family, cp=4)) == ("local", "ring")
    assert all(v.accepts == ("layer_index",) for v in family.variants)


def test_gated_delta_net_and_mlp_select_by_selector() -> None:
    families = _standard_families()
    assert _select(families["gated_delta_net"], backend="eager") == "eager"
    assert _select(families["gated_delta_net"], backend="chunked") == "chunked"
    assert _select(families["mlp"], mlp="plain", tp=8) == "plain"
    assert _select(families["mlp"], mlp="gated", tp=1) == "gated"
