"""Fast random inputs for bench/fuzz.py: .hpf texts, registries, HF configs and strategy flags.

Every generator takes a `random.Random` seeded from (campaign seed, input index),
so any input of a campaign is rebuilt exactly from its index (`--replay`). They
are plain `random` code rather than hypothesis strategies: a campaign of 10^6
inputs spends its time in hpdsl, not in drawing.
"""

from __future__ import annotations

import json
import random
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

from lark import Lark

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "property"))
sys.path.insert(0, str(ROOT))

from test_fuzz import _NAMES, _STRINGS, shipped_files  # noqa: E402  (the suite's vocabulary)

from hpdsl.resources import data_dir  # noqa: E402

# Characters that break tokens, lines and brackets (as tests/property/test_fuzz.py's _ODD).
ODD = ["\x00", "\x0b", "\x0c", "\r", "\t", "\n", "\u2028", "\ufeff", "é", "€", "{", "}", "[", "]",
       "(", ")", '"', "\\", "#", "/", "-", ".", "=", ":", ",", "*", "0", "9", "a", " ", "<", ">", "!"]
# Integers at the edges of every bound (fields, literals, int64, Python's digit limit).
EDGE_INTS = [0, 1, 2, 3, -1, -2, 7, 64, 1 << 16, (1 << 16) + 1, 1 << 20, (1 << 20) + 1, 1 << 31,
             (1 << 31) + 1, 1 << 32, 1 << 40, 1 << 62, (1 << 62) + 1, (1 << 63) - 1, 1 << 63, 1 << 64,
             10 ** 12, 10 ** 18, 10 ** 30, -(1 << 63)]


@cache
def shipped_texts() -> tuple[tuple[str, str], ...]:
    """Return (path, text) of every shipped .hpf file."""
    return tuple((str(path), path.read_text()) for path in shipped_files())


def _int(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.5:
        return rng.randint(0, 64)
    if roll < 0.8:
        return rng.choice(EDGE_INTS)
    return rng.randint(-(1 << 64), 1 << 64)


# --------------------------------------------------------------------------
# .hpf texts
# --------------------------------------------------------------------------


class GrammarWalk:
    """Random sentences of grammar/hpdsl.lark: a random walk over its rules, depth-limited."""

    def __init__(self) -> None:
        grammar = Lark.open(str(data_dir("grammar") / "hpdsl.lark"), parser="lalr")
        self.rules: dict[str, list[list[Any]]] = {}
        for rule in grammar.rules:
            self.rules.setdefault(rule.origin.name, []).append(list(rule.expansion))
        self.literals = {t.name: t.pattern.value for t in grammar.terminals if t.pattern.type == "str"}
        self.height = self._heights()

    def _heights(self) -> dict[str, int]:
        """Return the least derivation height of each rule (a fixpoint), to end walks that run deep."""
        height: dict[str, int] = {}
        changed = True
        while changed:
            changed = False
            for name, expansions in self.rules.items():
                for expansion in expansions:
                    parts = [height.get(s.name) if not s.is_term else 0 for s in expansion]
                    if None in parts:
                        continue
                    h = 1 + max((p for p in parts if p is not None), default=0)
                    if h < height.get(name, 1 << 30):
                        height[name], changed = h, True
        return height

    def sentence(self, rng: random.Random, *, spaced: bool) -> str:
        """Return one random sentence; tokens separated by spaces when `spaced`, else run together."""
        out: list[str] = []
        todo: list[tuple[Any, int]] = [(_Start(), 0)]
        budget = rng.choice([40, 200, 800])
        while todo:
            symbol, depth = todo.pop()
            if symbol.is_term:
                out.append(self._terminal(symbol.name, rng))
                continue
            expansions = self.rules[symbol.name]
            if len(out) + len(todo) > budget or depth > 40:
                expansion = min(expansions, key=lambda e: max(
                    (0 if s.is_term else self.height.get(s.name, 1 << 30) for s in e), default=0))
            else:
                expansion = rng.choice(expansions)
            todo.extend((s, depth + 1) for s in reversed(expansion))
        return (" " if spaced else "").join(out) + ("\n" if rng.random() < 0.5 else "")

    def _terminal(self, name: str, rng: random.Random) -> str:
        if name in self.literals:
            return str(self.literals[name])
        if name == "NAME":
            return rng.choice(_NAMES) if rng.random() < 0.8 else rng.choice("abcxyz_") + str(rng.randint(0, 99))
        if name == "INT":
            return str(_int(rng))
        if name == "FLOAT":
            return rng.choice(["1.5", "0.0", "-2.25", "1.0e-05", "2.0E+3", "1.0e308", "9.9e999"])
        if name == "STRING":
            return rng.choice(_STRINGS)
        if name == "COMPARE":
            return rng.choice(["==", "!=", "<", "<=", ">", ">="])
        if name == "COMMENT":
            return rng.choice(["// note", "# note", "//", "# é \x00"]) + "\n"
        return rng.choice([" ", "\n", "\t", "\r\n"])


class _Start:
    is_term = False
    name = "start"


@cache
def grammar_walk() -> GrammarWalk:
    """Return the walker (built once per process)."""
    return GrammarWalk()


def mutate_text(text: str, rng: random.Random) -> str:
    """Return `text` with one to four edits: characters, a run of lines, a number or a deep wrap."""
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        at = rng.randint(0, max(len(text) - 1, 0))
        if roll < 0.55:
            char = rng.choice(ODD) if rng.random() < 0.7 else chr(rng.randint(1, 0x2FFF))
            op = rng.randrange(3)
            text = text[:at] + (char if op else "") + text[at + (op != 1):]
        elif roll < 0.75:
            text = _renumber(text, rng)
        elif roll < 0.85:
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            j = min(len(lines), i + rng.randint(1, 8))
            times = rng.choice([0, 2, 3, 50])
            text = "\n".join([*lines[:i], *lines[i:j] * times, *lines[j:]])
        elif roll < 0.95:
            end = min(len(text), at + rng.randint(1, 200))
            text = text[:at] + text[at:end] * rng.choice([2, 3]) + text[end:]
        else:
            open_, close = rng.choice([("(", ")"), ("[", "]"), ("{", "}"), ("not ", ""), ("[", "] * 2")])
            depth = rng.choice([30, 99, 100, 101, 300, 5000])
            end = min(len(text), at + rng.randint(0, 40))
            text = text[:at] + open_ * depth + text[at:end] + close * depth + text[end:]
    return text


_NUMBER = re.compile(r"-?\b[0-9]+\b")


def _renumber(text: str, rng: random.Random) -> str:
    numbers = list(_NUMBER.finditer(text))
    if not numbers:
        return text
    match = rng.choice(numbers)
    return text[:match.start()] + str(_int(rng)) + text[match.end():]


def splice(rng: random.Random) -> tuple[str, str]:
    """Return a shipped file with a run of another's lines spliced in."""
    (path, into), (_, donor) = rng.choice(shipped_texts()), rng.choice(shipped_texts())
    lines, taken = into.split("\n"), donor.split("\n")
    start = rng.randrange(len(taken))
    run = taken[start:start + rng.randint(1, 12)]
    at = rng.randint(0, len(lines))
    return path, "\n".join([*lines[:at], *run, *lines[at:]])


def hpf_input(rng: random.Random) -> tuple[str, str]:
    """Return (name, text) of one fuzzed .hpf source: grammar sentence, mutation or splice."""
    roll = rng.random()
    if roll < 0.35:
        text = grammar_walk().sentence(rng, spaced=rng.random() < 0.8)
        if rng.random() < 0.3:
            text = mutate_text(text, rng)
        return str(ROOT / "examples" / "fuzz_generated.hpf"), text
    if roll < 0.85:
        path, text = rng.choice(shipped_texts())
        return path, mutate_text(text, rng)  # named as the original: a mutated stdlib file replaces it
    path, text = splice(rng)
    return path, mutate_text(text, rng) if rng.random() < 0.3 else text


# --------------------------------------------------------------------------
# JSON values: registries and HF configs
# --------------------------------------------------------------------------


def json_value(rng: random.Random, depth: int = 0) -> Any:
    """Return a random JSON-ish value (NaN and infinities included)."""
    roll = rng.random()
    if depth < 2 and roll < 0.15:
        return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2 and roll < 0.25:
        return {rng.choice(["name", "kind", "count", "x", ""]): json_value(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    return rng.choice([
        None, True, False, _int(rng), _int(rng), rng.choice([0.5, -0.0, 1e308, float("inf"),
                                                              float("-inf"), float("nan"), 64.0]),
        rng.choice(["", "x", "decoder", "moe", "llama", "silu", "hpdsl.torch.modules:Mlp",
                    "hpdsl.torch.agreement:nn.utils.weight_norm", "os:system", "é\x00"]),
    ])


def mutate_data(data: Any, rng: random.Random, *, edits: int | None = None) -> Any:
    """Return JSON data with values replaced, keys dropped, added or renamed; `data` is left as it was.

    Only the containers on the path to each edit are copied (the rest is shared
    with `data`): a deep copy of a registry would cost more than loading it.
    """
    data = _shallow(data)
    for _ in range(edits or rng.randint(1, 4)):
        parent, key = _random_slot(data, rng)
        if parent is None:
            continue
        roll = rng.random()
        if isinstance(parent, dict) and roll < 0.25:
            del parent[key]
        elif isinstance(parent, dict) and roll < 0.35:
            parent[key + rng.choice(["_", "x", ""]) or "k"] = parent.pop(key)
        elif isinstance(parent, list) and roll < 0.35:
            parent.insert(key, parent[key])
        elif roll < 0.5 and isinstance(parent[key], int) and not isinstance(parent[key], bool):
            parent[key] = rng.choice(EDGE_INTS)
        else:
            parent[key] = json_value(rng)
    return data


def _shallow(node: Any) -> Any:
    return dict(node) if isinstance(node, dict) else list(node) if isinstance(node, list) else node


def _random_slot(data: Any, rng: random.Random) -> tuple[Any, Any]:
    """Return a random (container, key) below `data`, copying each container on the way (data is a copy)."""
    parent, key, node = None, None, data
    while isinstance(node, (dict, list)) and node and (parent is None or rng.random() < 0.7):
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        chosen = rng.choice(keys)
        child = node[chosen]
        if isinstance(child, (dict, list)):
            child = node[chosen] = _shallow(child)
        parent, key, node = node, chosen, child
    return parent, key


def mutate_json_text(text: str, rng: random.Random) -> str:
    """Return JSON text with characters edited, a number replaced or a deep nest inserted."""
    roll = rng.random()
    at = rng.randint(0, max(len(text) - 1, 0))
    if roll < 0.5:
        char = rng.choice(['"', "{", "}", "[", "]", ",", ":", "0", "-", "e", "\\", "\x00", "é", " "])
        op = rng.randrange(3)
        return text[:at] + (char if op else "") + text[at + (op != 1):]
    if roll < 0.8:
        return _renumber(text, rng).replace("9" * 3, rng.choice(["999", "NaN", "Infinity", "9" * 5000]), 1)
    depth = rng.choice([100, 999, 1000, 100_000])
    return text[:at] + "[" * depth + "]" * depth + text[at:]


def hf_config(rng: random.Random) -> dict[str, Any]:
    """Return a published HF config (tests/importers/hf_configs.py) with random edits."""
    from tests.importers.hf_configs import CONFIGS

    config = CONFIGS[rng.choice(sorted(CONFIGS))][0]
    if rng.random() < 0.5 and isinstance(config.get("text_config"), dict):
        config = {**config, "text_config": mutate_data(config["text_config"], rng)}
        return config if rng.random() < 0.5 else mutate_data(config, rng, edits=1)
    return mutate_data(config, rng)


# --------------------------------------------------------------------------
# Strategy flags
# --------------------------------------------------------------------------

_WORDS = {
    "--cp-kind": ["ring", "a2a", "x", ""], "--pp-split": ["16,16", "1,2,3", "-1,33", "0", "1,,2", "x"],
    "--recompute": ["none", "selective", "full", "some"], "--zero": ["none", "os", "os+grad", "os+grad+params", "z"],
    "--precision": ["bf16-mixed", "fp8-mixed", "fp32", "fp4"],
    "--optimizer": ["adam", "sgd-momentum", "adafactor", "lion"],
    "--device": ["h100", "h200", "a100", "mi300x", "ascend910b", "tpu"],
    "--micro-batches": ["1,2,4,8", "1,1", "0", "2", "9223372036854775807", "1," * 50 + "2", "x,1"],
    "--vpp": ["1", "1,2", "2", "0", "9223372036854775807"],
}


def flag_value(flag: str, kind: type, rng: random.Random) -> str:
    """Return one command-line value for a flag of `kind` (int, float or str)."""
    if flag in _WORDS and rng.random() < 0.9:
        return rng.choice(_WORDS[flag])
    if kind is float:
        return rng.choice(["0.4", "1", "0", "-1", "1e-300", "1e308", "inf", "nan", "80", "0.5", "1e30"])
    roll = rng.random()
    if roll < 0.55:
        return str(rng.choice([1, 1, 2, 2, 4, 8, 16, 32, 64, 128, 4096]))
    if roll < 0.9:
        return str(rng.choice(EDGE_INTS))
    return rng.choice(["1e30", "x", "", "2.5", str(rng.randint(1, 1 << 70))])


def flag_args(table: tuple[tuple[str, str, type, str], ...], rng: random.Random,
              required: tuple[str, ...] = ()) -> list[str]:
    """Return random arguments for a flag table: a few flags, each with a random value."""
    args: list[str] = []
    chosen = rng.sample(table, min(len(table), rng.randint(1, 5)))
    chosen += [row for row in table if row[1] in required and row not in chosen]
    for flag, name, kind, _ in chosen:
        if kind is bool:
            args.append(rng.choice(flag.split("/")))
        else:
            args += [flag.split("/")[0], flag_value(flag, kind, rng)]
    return args


def json_dumps(data: Any) -> str:
    """Return JSON text as registry.json and config.json are written (NaN allowed, as Python writes it)."""
    return json.dumps(data, allow_nan=True)
