"""Parse and check throughput of hpdsl beside libyaml, PyYAML and json on the same data, interleaved.

Generates 1,000 profiles and 1,000 families (the standard op vocabulary in scope),
writes them as .hpf, as the equivalent YAML and as the equivalent JSON, then
times in interleaved rounds (one run of each contender per round, best of the
rounds): `yaml.load(Loader=yaml.CSafeLoader)` (libyaml, C), `json.loads` (C),
`yaml.safe_load` (pure Python), hpdsl parse (text -> AST), the same parse by
Lark alone (`lark_parse`, what every text would cost without the fast path of
hpdsl/syntax/fast.py; docs/benchmarks.md, "Why two parsers"), parse + check
(-> diagnostics) and the full compile (-> IR), each on a freshly named source
(a remembered parse would time a lookup). The .hpf text is split into files of
FILE_DECLARATIONS declarations (a file is capped at 256 KiB, hpdsl/syntax/parser.py);
YAML and JSON read one document. Times are the process's CPU time (on a shared
machine the wall clock times the other jobs too), each run after a full
collection so none pays for another's garbage. Ratios are to CSafeLoader; a time
alone on a shared machine means little. Also times compiling the standard library.

    .venv/bin/python bench/bench_compile.py [--profiles 1000] [--families 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import yaml

from hpdsl.api import compile_sources
from hpdsl.check import check_files
from hpdsl.diagnostics import Source
from hpdsl.resources import stdlib_files
from hpdsl.syntax import parse_source
from hpdsl.syntax.parser import lark_parse

FILE_DECLARATIONS = 200
"""Declarations per generated .hpf file: about 70 KB, well under the file cap."""

OPS = ("attMM", "attBMM", "ffMM", "softmax", "dropout", "normOp", "gather", "headCast", "ffAct", "linrec")


def profile_data(i: int) -> dict[str, Any]:
    """Return one generated profile as plain data (what the YAML holds)."""
    full = {op: (i + k) % 5 for k, op in enumerate(OPS)}
    full["linrec"] = 0
    linear = {**full, "attBMM": 0, "softmax": 0, "headCast": 0, "linrec": 1}
    return {"name": f"p{i}", "default": "full", "run": {"grad_bytes": 2, "shard_activations": True},
            "kinds": {"full": {"ops": full}, "linear": {"attention": "linear", "ops": linear}}}


def family_data(i: int) -> dict[str, Any]:
    """Return one generated family as plain data."""
    return {"name": f"f{i}", "factory": f"pkg.mod:F{i}", "parallel": "ep",
            "selectors": {"fast": {"type": "bool", "default": False},
                          "backend": {"type": "enum", "values": ["a", "b"], "default": "a"}},
            "require": [{"when": "fast -> tp == 1", "message": "fast needs tp 1"}],
            "variants": {"fast": {"path": f"pkg.mod:Fast{i}", "when": "fast and not parallel"},
                         "ep": {"path": f"pkg.mod:Ep{i}", "when": "parallel and not fast"},
                         "local": {"path": f"pkg.mod:F{i}", "default": True}}}


def profile_hpf(data: dict[str, Any]) -> str:
    """Write one generated profile as .hpf text."""
    kinds = []
    for name, kind in data["kinds"].items():
        ops = "  ".join(f"{op} {n}" for op, n in kind["ops"].items())
        flavour = f"    attention {kind['attention']}\n" if "attention" in kind else ""
        kinds.append(f"  kind {name} {{\n{flavour}    ops {{ {ops} }}\n  }}\n")
    return (f"profile {data['name']} {{\n  default {data['default']}\n"
            "  run { grad_bytes = 2  shard_activations = true }\n" + "".join(kinds) + "}\n")


def family_hpf(data: dict[str, Any]) -> str:
    """Write one generated family as .hpf text."""
    i = data["name"][1:]
    return (f"family {data['name']} {{\n  factory \"pkg.mod:F{i}\"\n  parallel ep\n"
            "  selector fast: bool = false\n  selector backend: enum(a, b) = a\n"
            "  require fast -> tp == 1 \"fast needs tp 1\"\n"
            f"  variant fast \"pkg.mod:Fast{i}\" when fast and not parallel\n"
            f"  variant ep \"pkg.mod:Ep{i}\" when parallel and not fast\n"
            f"  variant local \"pkg.mod:F{i}\" default\n}}\n")


def timed(fn: Callable[[], Any]) -> float:
    """Return the CPU time of one call, after a collection so it pays for no earlier contender's garbage."""
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def interleaved(contenders: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Return each contender's best CPU time over `rounds` rounds that run every contender once."""
    times = {name: float("inf") for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            times[name] = min(times[name], timed(fn))
    return times


def best(fn: Callable[[], Any], repeat: int) -> float:
    """Return the best CPU time of `repeat` calls."""
    return min(timed(fn) for _ in range(repeat))


def main() -> None:
    """Run the benchmark and print times, lines per second and ratios to YAML."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", type=int, default=1000)
    parser.add_argument("--families", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    profiles = [profile_data(i) for i in range(args.profiles)]
    families = [family_data(i) for i in range(args.families)]
    declarations = [*map(profile_hpf, profiles), *map(family_hpf, families)]
    texts = ["".join(declarations[i:i + FILE_DECLARATIONS])
             for i in range(0, len(declarations), FILE_DECLARATIONS)]
    text = "".join(texts)
    yaml_text = yaml.safe_dump({"profiles": profiles, "families": families}, sort_keys=False)
    runs = itertools.count()

    def fresh() -> list[Source]:
        # New names each run: parses are remembered by name and text (hpdsl/syntax/parser.py),
        # and a remembered parse would time a dictionary lookup, not the parser.
        run = next(runs)
        return [Source(f"generated-{run}-{i}.hpf", t) for i, t in enumerate(texts)]

    def parse_all() -> list[Any]:
        return [parse_source(s) for s in fresh()]

    def lark_all() -> list[Any]:
        return [lark_parse(s) for s in fresh()]

    sources = fresh()
    stdlib = [Source(name, path.read_text()) for name, path in stdlib_files()]
    lines = text.count("\n")

    json_text = json.dumps({"profiles": profiles, "families": families})
    stdlib_parsed = [parse_source(s) for s in stdlib]
    contenders: dict[str, Callable[[], Any]] = {
        "yaml CSafeLoader (libyaml)": lambda: yaml.load(yaml_text, Loader=yaml.CSafeLoader),
        "json.loads": lambda: json.loads(json_text),
        "yaml.safe_load (Python)": lambda: yaml.safe_load(yaml_text),
        "hpdsl parse": parse_all,
        "hpdsl parse (Lark alone)": lark_all,
        "hpdsl parse + check": lambda: check_files([*stdlib_parsed, *parse_all()]),
        "hpdsl compile (to IR)": lambda: compile_sources(fresh(), stdlib=True),
    }
    compile_sources(sources, stdlib=True)  # a SpecError listing the first diagnostics if it fails
    times = interleaved(contenders, args.repeat)
    base = times["yaml CSafeLoader (libyaml)"]

    print(f"generated input: {args.profiles} profiles, {args.families} families, {lines:,} lines "
          f"(.hpf {len(text):,} bytes in {len(texts)} files, YAML {len(yaml_text):,}, JSON {len(json_text):,})")
    print(f"{'stage':<28}{'CPU s':>10}{'lines/s':>14}{'x CSafeLoader':>15}")
    for label, seconds in times.items():
        print(f"{label:<28}{seconds:>10.3f}{lines / seconds:>14,.0f}{seconds / base:>15.2f}")
    print(f"Lark alone / hpdsl parse: {times['hpdsl parse (Lark alone)'] / times['hpdsl parse']:.1f}x "
          "(what the fast path saves on valid text)")

    std_text = "".join(s.text for s in stdlib)
    std_yaml = yaml.safe_dump({"files": [s.text for s in stdlib]})
    t_std = best(lambda: compile_sources([], stdlib=True), args.repeat)
    t_std_yaml = best(lambda: yaml.load(std_yaml, Loader=yaml.CSafeLoader), args.repeat)
    print(f"standard library: {len(stdlib)} files, {std_text.count(chr(10)):,} lines, compiled in "
          f"{t_std * 1e3:.1f} ms ({t_std / t_std_yaml:.1f}x CSafeLoader of the same text as YAML strings)")


if __name__ == "__main__":
    main()
