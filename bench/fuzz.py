"""Long fuzz campaigns: only hpdsl errors escape, every input ends in bounded time.

Runs the suite's fuzz strategies (tests/property/test_fuzz.py: grammar sentences,
shipped files mutated byte by byte, shipped files spliced together) with a large
budget against compile and fmt, plus mutated registry.json files against
load_registry. A finding is any exception that is not an HpdslError, or an input
that takes longer than the time bound; hypothesis shrinks it and the campaign
stops, printing it. Turn each finding into a case under tests/cases/ with its
expected diagnostic.

    .venv/bin/python bench/fuzz.py --examples 100000            # every target
    .venv/bin/python bench/fuzz.py --target compile --examples 1000000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "property"))
sys.path.insert(0, str(ROOT / "tests"))

from test_fuzz import (  # noqa: E402  (the suite's strategies, after the path is set)
    COMPILE_SECONDS, assert_only_diagnostics, grammar_texts, mutated_files, spliced_files,
)

from hpdsl.api import compile_paths  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.errors import HpdslError  # noqa: E402
from hpdsl.fmt import format_file  # noqa: E402
from hpdsl.ir.convert import registry_to_json  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.syntax import parse_source  # noqa: E402


def _texts() -> st.SearchStrategy[Source]:
    grammar = grammar_texts(spaced=True).map(lambda t: Source(str(ROOT / "examples" / "fuzz.hpf"), t))
    return grammar | mutated_files() | spliced_files()


def _compile(source: Source) -> None:
    assert_only_diagnostics([source])


def _fmt(source: Source) -> None:
    try:
        parsed = parse_source(source)
    except HpdslError:
        return
    once = format_file(parsed)
    assert format_file(parse_source(Source(source.name, once))) == once, "fmt is not idempotent"


def _registry_json() -> str:
    return registry_to_json(compile_paths([ROOT / "examples"]).ir)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)


@st.composite
def mutated_registries(draw: st.DrawFn, text: str) -> str:
    """Draw the shipped registry with values replaced, keys dropped or bytes changed."""
    data = json.loads(text)
    for _ in range(draw(st.integers(1, 4))):
        node, path = data, []
        while isinstance(node, (dict, list)) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
            path.append(key)
            node = node[key]
        if not path:
            continue
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(_JSON_VALUES)
    return json.dumps(data, allow_nan=True)


def _load(text: str) -> None:
    try:
        Registry.from_json(text, name="fuzzed.json")
    except HpdslError:
        pass


def run(target: str, examples: int) -> None:
    """Run one campaign of `examples` inputs; raise on the first (shrunk) finding."""
    config = settings(max_examples=examples, deadline=COMPILE_SECONDS * 1000, database=None,
                      suppress_health_check=list(HealthCheck))
    if target == "registry":
        text = _registry_json()
        test = given(mutated_registries(text))(_load)
    else:
        test = given(_texts())(_compile if target == "compile" else _fmt)
    started = time.perf_counter()
    config(test)()
    print(f"{target}: {examples:,} inputs, no finding ({time.perf_counter() - started:.1f} s)")


def main() -> None:
    """Parse the arguments and run each asked campaign."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", choices=("compile", "fmt", "registry", "all"), default="all")
    parser.add_argument("--examples", type=int, default=10_000)
    arguments = parser.parse_args()
    targets = ("compile", "fmt", "registry") if arguments.target == "all" else (arguments.target,)
    for target in targets:
        run(target, arguments.examples)


if __name__ == "__main__":
    main()
