"""Only hpdsl errors escape: any text at all goes through the whole pipeline as diagnostics.

Three sources of text: (a) sentences of the grammar (`from_lark`), spaced so most of
them parse and reach the checks, and raw so tokens run together; (b) the shipped
.hpf files with characters deleted, inserted or replaced (NUL, non-ASCII, line
separators, brackets); (c) shipped files with lines of another spliced in. Each
compile must also end within COMPILE_SECONDS. bench/fuzz.py runs the same
strategies for long campaigns. `check_sources` must return either a registry or at
least one error, every diagnostic must carry a known code and a position inside
its text, and no exception of any kind may come out.
"""

from __future__ import annotations

import time
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark
from lark import Lark

from hpdsl.api import CompileResult, check_sources
from hpdsl.diagnostics import CODES, Source, render_diagnostics
from hpdsl.resources import data_dir

ROOT = Path(__file__).resolve().parents[2]
# In-memory; named inside examples/ so `import "x.hpf"` looks beside the real examples.
GENERATED = str(ROOT / "examples" / "fuzz_generated.hpf")

_NAMES = (
    "full_attention", "linear_attention", "decoder", "encoder", "dense", "moe", "default",
    "qwen3_5", "llama2", "t5", "attMM", "attBMM", "ffMM", "softmax", "dropout", "normOp",
    "gather", "headCast", "ffAct", "linrec", "hidden", "layers", "heads", "kv_heads",
    "head_dim", "vocab", "ffn_width", "experts", "top_k", "width", "shared", "linear",
    "key_heads", "conv", "full", "tp", "cp", "ep", "pp", "parallel", "use_mxfp8", "backend",
    "grad_bytes", "shard_activations", "v_head_dim", "rmsnorm", "silu", "gated", "local",
)
_STRINGS = ('"hpdsl.torch.modules:GroupedExperts"', '"pkg.mod:Cls"', '"llama"', '"qwen3_next"',
            '"x.hpf"', '"ops.hpf"', '""', '"a\\"b"')
# No '/' in strings: a generated `import` must not reach files outside the tree.
_STRING_CHARS = st.characters(codec="utf-8", exclude_characters='"\\\n/')

names = st.sampled_from(_NAMES) | st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
ints = st.integers(-2, 64).map(str) | st.integers().map(str)
floats = st.sampled_from(["1.5", "0.0", "-2.25", "1.0e-05", "2.0E+3"])
strings = st.sampled_from(_STRINGS) | st.text(_STRING_CHARS, max_size=8).map(lambda s: f'"{s}"')
comments = st.sampled_from(["// note", "# note", "//", "# é \x00"])


@cache
def _grammar() -> Lark:
    return Lark.open(str(data_dir("grammar") / "hpdsl.lark"), parser="lalr")


def _spaced(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return strategy.map(lambda s: f" {s} ")


@cache
def grammar_texts(*, spaced: bool) -> st.SearchStrategy[str]:
    """Sentences of the grammar; spaced ones keep tokens apart, so most of them parse."""
    explicit = {"NAME": names, "INT": ints, "FLOAT": floats, "STRING": strings,
                "COMMENT": comments.map(lambda c: c + "\n"),
                "WS": st.sampled_from([" ", "\n", "\t", "\r\n", "\x0c"])}
    if spaced:
        explicit = {key: _spaced(value) for key, value in explicit.items()}
        for terminal in _grammar().terminals:
            if terminal.pattern.type == "str" and terminal.name not in explicit:
                explicit[terminal.name] = st.just(f" {terminal.pattern.value} ")
    return from_lark(_grammar(), explicit=explicit)


def shipped_files() -> list[Path]:
    """Return every shipped .hpf file (profiles, families, examples)."""
    return sorted(p for folder in ("profiles", "families", "examples")
                  for p in (ROOT / folder).glob("*.hpf"))


_ODD = st.sampled_from(["\x00", "\x0b", "\x0c", "\r", "\t", "\n", "\u2028", "\ufeff", "é", "€",
                        "{", "}", "[", "]", "(", ")", '"', "\\", "#", "/", "-", ".", "=", ":",
                        ",", "*", "0", "9", "a", " "])


@st.composite
def mutated_files(draw: st.DrawFn) -> Source:
    """Draw a shipped file with one to three characters deleted, inserted or replaced."""
    path = draw(st.sampled_from(shipped_files()))
    text = path.read_text()
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, max(len(text) - 1, 0)))
        char = draw(_ODD | st.characters(codec="utf-8"))
        operation = draw(st.sampled_from(["delete", "insert", "replace"]))
        if operation == "delete":
            text = text[:at] + text[at + 1:]
        elif operation == "insert":
            text = text[:at] + char + text[at:]
        else:
            text = text[:at] + char + text[at + 1:]
    # Named as the original, so a mutated standard file replaces the shipped one.
    return Source(str(path), text)


COMPILE_SECONDS = 2.0
"""The most CPU time one fuzzed compile may take (hostile input ends in bounded time: docs/trust.md#hostile-input)."""


@st.composite
def spliced_files(draw: st.DrawFn) -> Source:
    """Draw a shipped file with a run of lines from another shipped file spliced into it."""
    into, source = (draw(st.sampled_from(shipped_files())) for _ in range(2))
    lines, donor = into.read_text().split("\n"), source.read_text().split("\n")
    start = draw(st.integers(0, len(donor) - 1))
    taken = donor[start:start + draw(st.integers(1, 12))]
    at = draw(st.integers(0, len(lines)))
    return Source(str(into), "\n".join([*lines[:at], *taken, *lines[at:]]))


def assert_only_diagnostics(sources: list[Source]) -> CompileResult:
    """Compile in bounded time; check a registry or an error came back and every diagnostic is well placed."""
    started = time.process_time()  # CPU time: the suite and campaigns share a loaded machine
    result = check_sources(sources, stdlib=True)
    elapsed = time.process_time() - started
    assert elapsed < COMPILE_SECONDS, f"a compile took {elapsed:.2f} s of CPU"
    assert result.registry is not None or any(d.is_error for d in result.diagnostics)
    for diagnostic in result.diagnostics:
        assert diagnostic.code in CODES, diagnostic
        source = result.sources.get(diagnostic.span.file)
        assert source is not None, f"diagnostic outside every source: {diagnostic}"
        lines = source.text.split("\n")  # Lark counts lines by '\n' alone
        span = diagnostic.span
        assert 1 <= span.line <= len(lines), diagnostic
        assert 1 <= span.col <= len(lines[span.line - 1]) + 1, diagnostic
        assert (span.end_line, span.end_col) >= (span.line, span.col), diagnostic
    render_diagnostics(result.diagnostics, result.sources)  # must not raise either
    return result


_SLOW = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.filter_too_much])


@_SLOW
@given(grammar_texts(spaced=True))
@example("model m { hidden " + "9" * 5000 + " }")
@example("family f { require " + "not " * 500 + "a }")
@example('import "\x00"')
@example("\ufeffmodel m {}")
def test_grammar_sentences_give_diagnostics(text: str) -> None:
    assert_only_diagnostics([Source(GENERATED, text)])


@_SLOW
@given(grammar_texts(spaced=False))
def test_raw_grammar_sentences_give_diagnostics(text: str) -> None:
    assert_only_diagnostics([Source(GENERATED, text)])


@_SLOW
@given(mutated_files())
def test_mutated_files_give_diagnostics(source: Source) -> None:
    assert_only_diagnostics([source])


@_SLOW
@given(spliced_files())
def test_spliced_files_give_diagnostics(source: Source) -> None:
    assert_only_diagnostics([source])
