"""Parse and check throughput of hpdsl, beside PyYAML's safe_load of the same data, in one run.

Generates 1,000 profiles and 1,000 families (the standard op vocabulary in scope),
writes them as .hpf and as the equivalent YAML, then times, best of several runs:
hpdsl parse (text → AST), parse + check (→ diagnostics), the full compile (→ IR),
and `yaml.safe_load` of the YAML. Also times compiling the standard library.
Ratios are measured side by side here; a time alone on a shared machine means little.

    .venv/bin/python bench/bench_compile.py [--profiles 1000] [--families 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import yaml

from hpdsl.api import compile_sources
from hpdsl.check import check_files
from hpdsl.diagnostics import Source
from hpdsl.resources import stdlib_files
from hpdsl.syntax import parse_source

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


def best(fn: Callable[[], Any], repeat: int) -> float:
    """Return the best wall time of `repeat` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    """Run the benchmark and print times, lines per second and ratios to YAML."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", type=int, default=1000)
    parser.add_argument("--families", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    profiles = [profile_data(i) for i in range(args.profiles)]
    families = [family_data(i) for i in range(args.families)]
    text = "".join(map(profile_hpf, profiles)) + "".join(map(family_hpf, families))
    yaml_text = yaml.safe_dump({"profiles": profiles, "families": families}, sort_keys=False)
    source = Source("generated.hpf", text)
    stdlib = [Source(name, path.read_text()) for name, path in stdlib_files()]
    lines = text.count("\n")

    t_yaml = best(lambda: yaml.safe_load(yaml_text), args.repeat)
    t_parse = best(lambda: parse_source(source), args.repeat)
    t_check = best(lambda: check_files([*map(parse_source, stdlib), parse_source(source)]), args.repeat)
    compile_sources([source], stdlib=True)  # a SpecError listing the first diagnostics if it fails
    t_compile = best(lambda: compile_sources([source], stdlib=True), args.repeat)

    print(f"generated input: {args.profiles} profiles, {args.families} families, {lines:,} lines "
          f"(.hpf {len(text):,} bytes, YAML {len(yaml_text):,} bytes)")
    print(f"{'stage':<28}{'seconds':>10}{'lines/s':>14}{'x yaml.safe_load':>19}")
    for label, seconds in (("yaml.safe_load (same data)", t_yaml), ("hpdsl parse", t_parse),
                           ("hpdsl parse + check", t_check), ("hpdsl compile (to IR)", t_compile)):
        print(f"{label:<28}{seconds:>10.3f}{lines / seconds:>14,.0f}{seconds / t_yaml:>19.2f}")

    std_text = "".join(s.text for s in stdlib)
    std_yaml = yaml.safe_dump({"files": [s.text for s in stdlib]})
    t_std = best(lambda: compile_sources([], stdlib=True), args.repeat)
    t_std_yaml = best(lambda: yaml.safe_load(std_yaml), args.repeat)
    print(f"standard library: {len(stdlib)} files, {std_text.count(chr(10)):,} lines, compiled in "
          f"{t_std * 1e3:.1f} ms ({t_std / t_std_yaml:.1f}x yaml.safe_load of the same text as YAML strings)")


if __name__ == "__main__":
    main()
