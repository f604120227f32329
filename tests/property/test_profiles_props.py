"""Invariants of op profiles over generated and shipped profiles.

See docs/reference.md#op-vectors-are-complete-and-closed and
docs/reference.md#flavours-are-consistent.
"""

from __future__ import annotations

from functools import cache

from hypothesis import event, example, given
from hypothesis import strategies as st

from hpdsl import ast
from hpdsl.check import check_files
from hpdsl.errors import SpecError
from hpdsl.ir.lower_profiles import lower_profiles
from hpdsl.ir.nodes import KindIR, ProfileIR
from hpdsl.resources import data_dir
from hpdsl.syntax import parse_text

OPS = ("attMM", "attBMM", "ffMM", "softmax", "dropout", "normOp", "gather", "headCast", "ffAct",
       "linrec")
SCORE_OPS = ("attBMM", "softmax", "headCast")
VECTOR_CODES = {"unknown-op", "missing-op-count", "count-not-integer", "negative-count"}


@cache
def _vocabulary() -> ast.File:
    return parse_text((data_dir("profiles") / "ops.hpf").read_text(), "ops.hpf")


@cache
def _shipped() -> dict[str, ProfileIR]:
    # with the families the standard slot bindings (profiles/slots.hpf) name
    files = [parse_text(path.read_text(), path.name) for folder in ("profiles", "families")
             for path in sorted(data_dir(folder).glob("*.hpf"))]
    scope, diagnostics = check_files(files)
    assert diagnostics == ()
    return lower_profiles(scope)


# --------------------------------------------------------------------------
# Flavour consistency of the shipped profiles (docs/reference.md#flavours-are-consistent)
# --------------------------------------------------------------------------


def _full_sibling(profile: ProfileIR, kind: KindIR) -> KindIR:
    if kind.base is not None and profile.kinds[kind.base].attention == "full":
        return profile.kinds[kind.base]
    return next(k for k in profile.kinds.values() if k.attention == "full")


@given(st.sampled_from(sorted(_shipped())))
def test_linrec_agrees_with_the_attention_flavour(name: str) -> None:
    profile = _shipped()[name]
    for kind in profile.kinds.values():
        assert (kind.ops["linrec"] == 1) == (kind.attention == "linear")
        assert kind.ops["linrec"] in (0, 1)


@given(st.sampled_from(sorted(_shipped())))
def test_a_linear_kind_is_its_full_sibling_without_scores(name: str) -> None:
    profile = _shipped()[name]
    for kind in profile.kinds.values():
        if kind.attention != "linear":
            continue
        sibling = _full_sibling(profile, kind)
        assert all(kind.ops[op] == 0 for op in SCORE_OPS)
        others = [op for op in OPS if op not in SCORE_OPS + ("linrec",)]
        assert {op: kind.ops[op] for op in others} == {op: sibling.ops[op] for op in others}


@given(st.sampled_from(sorted(_shipped())))
def test_the_default_is_one_of_the_kinds(name: str) -> None:
    profile = _shipped()[name]
    if len(profile.kinds) == 1:
        assert profile.default == next(iter(profile.kinds))
    assert profile.default is None or profile.default in profile.kinds


# --------------------------------------------------------------------------
# Complete, closed op vectors (docs/reference.md#op-vectors-are-complete-and-closed)
# --------------------------------------------------------------------------

GOOD = st.integers(min_value=0, max_value=16).map(lambda n: ("int", n))
BAD = st.one_of(
    st.integers(max_value=-1).map(lambda n: ("int", n)),
    st.tuples(st.integers(-9, 9), st.integers(0, 99)).map(lambda p: ("float", f"{p[0]}.{p[1]}")),
    st.booleans().map(lambda b: ("bool", "true" if b else "false")),
    st.sampled_from(["four", "4", ""]).map(lambda s: ("string", f'"{s}"')),
)
EXTRA = st.one_of(st.sampled_from(["atMM", "ffBMM", "paramCast", "linRec", "norm_op"]),
                  st.from_regex(r"[a-z][A-Za-z0-9_]{0,6}", fullmatch=True))
Vector = dict[str, tuple[str, object]]


@st.composite
def vectors(draw: st.DrawFn) -> Vector:
    """Draw an op vector: mostly complete and well typed, with drops, extras and bad counts."""
    keep = draw(st.one_of(st.just(OPS), st.lists(st.sampled_from(OPS), unique=True)))
    extras = draw(st.one_of(st.just([]), st.lists(EXTRA, min_size=1, max_size=2)))
    names = list(dict.fromkeys(list(keep) + extras))
    spoilt = draw(st.one_of(st.just(set()), st.sets(st.sampled_from(names), min_size=1,
                                                    max_size=2))) if names else set()
    return {name: draw(BAD if name in spoilt else GOOD) for name in draw(st.permutations(names))}


def _text(vector: Vector) -> str:
    counts = "  ".join(f"{op} {value}" for op, (_, value) in vector.items())
    return f"profile generated {{\n  kind layer {{\n    ops {{ {counts} }}\n  }}\n}}\n"


def _errors(text: str) -> set[str] | None:
    """Return the error codes of checking `text`, or None when it does not parse."""
    try:
        file = parse_text(text, "generated.hpf")
    except SpecError:
        return None
    return {d.code for d in check_files([file, _vocabulary()])[1] if d.is_error}


def _valid(vector: Vector) -> bool:
    return (set(vector) == set(OPS)
            and all(kind == "int" and int(value) >= 0 for kind, value in vector.values()))


@given(vectors())
@example({op: ("int", 0) for op in OPS})
@example({op: ("int", 1) for op in OPS[:-1]})
@example({**{op: ("int", 1) for op in OPS}, "softmax": ("float", "1.0")})
def test_a_vector_checks_clean_iff_complete_closed_and_non_negative(vector: Vector) -> None:
    errors = _errors(_text(vector))
    event("valid" if _valid(vector) else "invalid")
    if _valid(vector):
        assert errors == set()
    else:
        # a name the grammar refuses as an op name fails at parse time; still not clean
        assert errors is None or (errors and errors <= VECTOR_CODES)


@given(st.fixed_dictionaries({op: GOOD for op in OPS}), st.permutations(OPS))
def test_lowered_ops_follow_the_vocabulary_order(vector: Vector, order: list[str]) -> None:
    text = _text({op: vector[op] for op in order})
    scope, diagnostics = check_files([parse_text(text, "generated.hpf"), _vocabulary()])
    assert not [d for d in diagnostics if d.is_error]
    kind = lower_profiles(scope)["generated"].kinds["layer"]
    assert tuple(kind.ops) == OPS
    assert kind.ops == {op: int(vector[op][1]) for op in OPS}  # type: ignore[call-overload]
