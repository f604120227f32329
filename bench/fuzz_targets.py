"""The campaign's targets: each takes a seeded `random.Random`, runs one input, raises on a finding.

A finding is any exception that is not an HpdslError (the CLI maps those to exit
1 or 2; anything else is exit 3), a broken contract (fmt not idempotent, an
accepted HF config that does not compile, an estimate or search whose JSON holds
a negative, infinite or NaN number) or an input over the time bound (bench/fuzz.py).
Everything costly and fixed (the shipped registry, the HF profiles, the cost
models the flags price) is built once per process.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from fuzz_inputs import (ROOT, flag_args, hf_config, hpf_input, json_dumps, mutate_data,
                         mutate_json_text, mutate_text)
from parse_agreement import agree, swap_keywords
from test_fuzz import assert_only_diagnostics

from hpdsl.api import check_sources
from hpdsl.diagnostics import Source
from hpdsl.errors import HpdslError
from hpdsl.fmt import format_file
from hpdsl.syntax import parse_source


class Finding(AssertionError):
    """A broken contract (the input is in the campaign's finding file)."""


LAST: dict[str, Any] = {}
"""The input the running target drew, kept for the finding file (bench/fuzz.py)."""


def _keep(value: Any) -> Any:
    LAST["input"] = value
    return value


def compile_target(rng: random.Random) -> None:
    """Compile a fuzzed source with the standard library: only diagnostics, well placed, in time."""
    name, text = _keep(hpf_input(rng))
    assert_only_diagnostics([Source(name, text)])


def fmt_target(rng: random.Random) -> None:
    """Format a fuzzed source that parses: the output parses and formats to itself."""
    name, text = _keep(hpf_input(rng))
    try:
        parsed = parse_source(Source(name, text))
    except HpdslError:
        return
    once = format_file(parsed)
    try:
        again = format_file(parse_source(Source(name, once)))
    except HpdslError as error:
        raise Finding(f"fmt wrote text that does not parse: {error}") from None
    if again != once:
        raise Finding("fmt is not idempotent")


def parse_agree_target(rng: random.Random) -> None:
    """Parse a fuzzed source (names swapped for keywords in some) both ways: the fast path defers or builds Lark's tree."""
    name, text = hpf_input(rng)
    if rng.random() < 0.3:
        text = swap_keywords(text, rng)
    _keep((name, text))
    try:
        agree(Source(name, text))
    except AssertionError as error:
        raise Finding(str(error)[:2000]) from None


@cache
def _registry() -> tuple[str, Any, str, Any]:
    """Return the shipped examples' registry (text, data) and a small one-model registry (text, data)."""
    from hpdsl.api import compile_paths

    full = compile_paths([ROOT / "examples"]).to_json()
    data = json.loads(compile_paths([ROOT / "examples" / "llama2_7b.hpf"]).to_json())
    # One model, its profile and the families its slots name: a sixth of the size, six times the loads.
    profile = data["profiles"]["llama2"]
    used = {*profile["slots"].values(), *(f for kind in profile["kinds"].values() for f in kind["slots"].values())}
    data["profiles"] = {"llama2": profile}
    data["families"] = {name: family for name, family in data["families"].items() if name in used}
    small = json_dumps(data)
    return full, json.loads(full), small, data


def registry_target(rng: random.Random) -> None:
    """Load a mutated registry.json; if it loads, bind and price every model in it."""
    from hpdsl.registry import Registry

    full, full_data, small, small_data = _registry()
    text, data = (full, full_data) if rng.random() < 0.1 else (small, small_data)
    text = json_dumps(mutate_data(data, rng)) if rng.random() < 0.75 else mutate_json_text(text, rng)
    _keep(text)
    try:
        registry = Registry.from_json(text, name="fuzzed.json")
        _price_all(registry)
    except HpdslError:
        pass


def _price_all(registry: Any) -> None:
    from hpdsl.cost import bind, parameters

    for model in registry.models.values():
        cost_model = bind(model, registry.profile(model.profile))
        report = parameters(cost_model)
        if report.total < 0 or report.active < 0:
            raise Finding(f"a loaded registry prices {model.name} at {report.total} parameters")


@cache
def _profiles() -> Any:
    result = check_sources([], stdlib=True)
    assert result.registry is not None
    return result.registry.profiles


def import_hf_target(rng: random.Random) -> None:
    """Import a mutated HF config (as a mapping or as config.json text); exit 0 only with a model that compiles."""
    from hpdsl.importers.hf import check_imported, import_hf_config, import_hf_file

    config = _keep(hf_config(rng))
    allow_unknown = rng.random() < 0.5
    try:
        if rng.random() < 0.15:
            text = json_dumps(config)
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "config.json"
                path.write_text(mutate_json_text(text, rng) if rng.random() < 0.5 else text)
                imported = import_hf_file(path, profiles=_profiles(), allow_unknown=allow_unknown)
        else:
            imported = import_hf_config(config, profiles=_profiles(), name="fuzzed", allow_unknown=allow_unknown)
        check_imported(imported)  # what `hpdsl import-hf` runs before it writes
    except HpdslError:
        return
    result = check_sources([Source(str(ROOT / "examples" / "fuzzed_import.hpf"), imported.text)])
    if result.registry is None:
        raise Finding("import-hf accepted a config whose model does not compile: "
                      + "; ".join(d.message for d in result.errors)[:300])


_SPECS = ("llama3_8b", "mixtral_8x7b", "deepseek_v3", "qwen3_next_80b_a3b", "t5_small")


@cache
def _cost_model(name: str) -> Any:
    from hpdsl.cli.models import load_cost_model

    return load_cost_model([ROOT / "examples" / f"{name}.hpf"], None, stdlib=True)


def flags_target(rng: random.Random) -> None:
    """Parse random `estimate` or `search` flags as the CLI does and price them: JSON finite and non-negative."""
    import click

    from hpdsl.cli.cost import estimate_command, estimate_from_flags, search_from_flags, search_command
    from hpdsl.cli.options import ESTIMATE_FLAGS, SEARCH_FLAGS

    spec = rng.choice(_SPECS)
    searching = rng.random() < 0.2
    command = search_command if searching else estimate_command
    table = SEARCH_FLAGS if searching else ESTIMATE_FLAGS
    args = [str(ROOT / "examples" / f"{spec}.hpf"), *flag_args(table, rng, ("devices",) if searching else ())]
    if searching and "--devices" in args:  # a search's cost grows with the count: mostly small ones
        index = args.index("--devices") + 1
        if rng.random() < 0.8:
            args[index] = str(rng.choice([1, 2, 8, 16, 64, 96]))
    _keep(args)
    try:
        context = command.make_context(command.name, list(args))
    except click.ClickException:
        return  # click's own usage error: exit 2
    # The flag table's own flags only: --set, --plot, --run and the like are not strategy flags.
    flags = {name: context.params[name] for _, name, _, _ in table if name in context.params}
    try:
        result = (search_from_flags if searching else estimate_from_flags)(_cost_model(spec), flags)
    except HpdslError:
        return
    bad = list(_bad_numbers(result.to_json()))
    if bad:
        raise Finding(f"{' '.join(args[1:])}: {bad[:4]}")


def _bad_numbers(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _bad_numbers(value, f"{path}.{key}")
    elif isinstance(node, (list, tuple)):
        for index, value in enumerate(node):
            yield from _bad_numbers(value, f"{path}[{index}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        if not math.isfinite(node) or node < 0:
            yield path, node


SECONDS: dict[str, float] = {"flags": 10.0}
"""Time bounds other than the campaign's (--seconds): a search prices up to MAX_CANDIDATES strategies."""

TARGETS: dict[str, Callable[[random.Random], None]] = {
    "compile": compile_target, "fmt": fmt_target, "registry": registry_target,
    "import-hf": import_hf_target, "flags": flags_target, "parse-agree": parse_agree_target,
}
"""Every target, by the name --targets takes."""

__all__ = ["LAST", "SECONDS", "TARGETS", "Finding", "mutate_text"]
