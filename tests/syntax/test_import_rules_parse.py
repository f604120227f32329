"""Import rules (`hf { ... }` in a profile): Lark and the fast parser agree, and fmt is a fixed point.

tests/property/parse_agreement.py's agree() holds the fast parser's ast.File equal to
Lark's, spans and comments included, or the fast path deferring where Lark fails.
"""

from __future__ import annotations

import pytest
from property.parse_agreement import agree

from hpdsl import ast
from hpdsl.diagnostics import Source
from hpdsl.fmt import format_source
from hpdsl.ir.lower_profiles import lower_import_rules
from hpdsl.syntax import parse_text

KIND = "kind k { ops { attMM 4 } }"

TEXTS = [
    f'profile p {{ {KIND} hf {{}} }}',
    f'profile p {{ {KIND} hf "a" "b" {{ default x = 1  default y unset  default z = "auto" }} }}',
    f'profile p {{ {KIND} hf "*" {{ map a -> hidden  map b -> moe.experts  read c d  read e }} }}',
    f'profile p {{ {KIND} hf {{ ignore "why" {{ a  b = false  "*_x"  c = "s" }} ignore "w" {{}} }} }}',
    f'profile p {{ {KIND} hf {{ pattern hp {{ "M" -> m  "*" -> f }} derive ffn_width = 4 * (hidden + 2) / 2 }} }}',
    f'profile p {{ {KIND} hf {{ read unset hf default }} }}',            # `default` ends the read
    f'profile p {{ {KIND} hf {{ default map = 1 map read -> x }} }}',   # keywords as names where Lark allows
    f'profile p {{ {KIND} hf {{ default x = 1 map a -> b }} }}',        # a keyword right after a literal
    f'profile p {{ {KIND} hf {{ ignore "w" {{ a = 1 map }} }} }}',      # ... where only a name may stand
    f'profile p {{ {KIND} hf {{ map a -> wiring {{ true -> parallel  false -> pre_norm }} map b -> c {{}} }} }}',
    f'profile p {{ {KIND} hf {{ map a.b -> m.f {{ "x" -> "y"  1 -> 2.5  -> map }} }} }}',  # a value missing
    f'profile p {{ {KIND} hf {{ map a -> f {{ 1 -> default  2 -> map }} default x = 1 }} }}',  # keywords as names
    f'profile p {{ {KIND} hf {{ default x }} }}',
    f'profile p {{ {KIND} hf {{ map a -> }} }}',
    f'profile p {{ {KIND} hf {{ derive a = }} }}',
    f'profile p {{ {KIND} hf "a" }}',
    '// a comment\nprofile p {\n  kind k { ops { attMM 4 } }\n  hf "a" { // trailing\n    read x // why\n  }\n}\n',
]


@pytest.mark.parametrize("text", TEXTS)
def test_lark_and_the_fast_parser_agree(text: str) -> None:
    agree(Source("rules.hpf", text))


def test_every_rule_parses_to_its_node() -> None:
    file = parse_text(TEXTS[1] + TEXTS[2].replace("profile p", "profile q") + TEXTS[3].replace("profile p", "profile r")
                      + TEXTS[4].replace("profile p", "profile s"))
    rules = [rule for profile in file.items if isinstance(profile, ast.Profile) for item in profile.items
             if isinstance(item, ast.ImportRules) for rule in item.rules]
    kinds = {type(rule).__name__ for rule in rules}
    assert kinds == {"HfDefault", "HfMap", "HfRead", "HfIgnore", "HfPattern", "HfDerive"}
    unset = next(r for r in rules if isinstance(r, ast.HfDefault) and r.key.value == "y")
    assert unset.value is None
    block = next(r for r in rules if isinstance(r, ast.HfMap) and r.block is not None)
    assert (block.key.value, block.block.value, block.field.value) == ("b", "moe", "experts")


@pytest.mark.parametrize("text", [t for t in TEXTS[:8] if "read unset" not in t] + [TEXTS[9], TEXTS[11], TEXTS[-1]])
def test_fmt_is_canonical_and_a_fixed_point(text: str) -> None:
    once = format_source(Source("rules.hpf", text))
    assert format_source(Source("rules.hpf", once)) == once
    assert _rules(once) == _rules(text)  # the same rules, whatever the layout


def _rules(text: str) -> list[object]:
    """Return the IR of every hf block of a text (no spans: what the rules mean)."""
    return [lower_import_rules(item) for profile in parse_text(text).items if isinstance(profile, ast.Profile)
            for item in profile.items if isinstance(item, ast.ImportRules)]


def test_fmt_fills_a_long_ignore_block_and_continues_a_long_read() -> None:
    keys = "  ".join(f"key_number_{i}" for i in range(20))
    reads = " ".join(f"layer_types_{i}" for i in range(20))
    text = f'profile p {{ {KIND} hf {{ ignore "why" {{ {keys} }}  read {reads} }} }}'
    once = format_source(Source("rules.hpf", text))
    assert all(len(line) <= 120 for line in once.splitlines())
    assert format_source(Source("rules.hpf", once)) == once
    assert once.count("key_number_") == 20 and once.count("layer_types_") == 20


WEIGHT_TEXTS = [
    f'profile p {{ {KIND} hf {{ weight "model.layers.{{i}}.self_attn." -> "layers.{{i}}.mixer." '
    f'weight "m.{{i}}.experts.gate_up_proj" -> "l.{{i}}.ffn.experts.gate_up_proj" transposed  default x = 1 }} }}',
    f'profile p {{ {KIND} hf {{ default x = 1 weight "a" -> "b" }} }}',      # the keyword right after a literal
    f'profile p {{ {KIND} hf {{ map transposed -> hidden  read weight }} }}',  # both words as names
    f'profile p {{ {KIND} hf {{ weight "a" -> "b" transposed transposed }} }}',
    f'profile p {{ {KIND} hf {{ weight "a" -> }} }}',
    f'profile p {{ {KIND} hf {{ weight transposed -> "b" }} }}',
    f'profile p {{ {KIND} hf {{ weight join("m.{{i}}.qkv.", "m.{{i}}.z.",) -> "l.{{i}}.qkvz."  default x = 1 }} }}',
    f'profile p {{ {KIND} hf {{ weight join("a") -> "b" }} }}',  # one part: no join
    f'profile p {{ {KIND} hf {{ weight join("a", "b") -> split("c", "d") by (heads, heads) }} }}',  # parses; checked
    f'profile p {{ {KIND} hf {{ map join -> hidden }} }}',  # the word as a name
]


def test_a_join_rule_lowers_to_its_sources_and_formats_to_a_fixed_point() -> None:
    text = WEIGHT_TEXTS[6]
    once = format_source(Source("rules.hpf", text))
    assert 'weight join("m.{i}.qkv.", "m.{i}.z.") -> "l.{i}.qkvz."' in once
    assert format_source(Source("rules.hpf", once)) == once and _rules(once) == _rules(text)
    (rule,) = _rules(text)[0].weights
    assert (rule.source, rule.sources, rule.target) == ("m.{i}.qkv.", ("m.{i}.qkv.", "m.{i}.z."), "l.{i}.qkvz.")


@pytest.mark.parametrize("text", WEIGHT_TEXTS)
def test_lark_and_the_fast_parser_agree_on_weight_rules(text: str) -> None:
    agree(Source("rules.hpf", text))


def test_a_weight_rule_parses_lowers_and_formats() -> None:
    text = WEIGHT_TEXTS[0]
    once = format_source(Source("rules.hpf", text))
    assert 'weight "m.{i}.experts.gate_up_proj" -> "l.{i}.ffn.experts.gate_up_proj" transposed' in once
    assert format_source(Source("rules.hpf", once)) == once
    (rules,) = _rules(text)
    assert [(w.source, w.target, w.transposed) for w in rules.weights] == [
        ("model.layers.{i}.self_attn.", "layers.{i}.mixer.", False),
        ("m.{i}.experts.gate_up_proj", "l.{i}.ffn.experts.gate_up_proj", True)]
# --- split rules: a fused tensor's rows cut into parts (GPT-2's c_attn, GPT-NeoX's query_key_value) ---
SPLIT_TEXTS = [
    f'profile p {{ {KIND} hf {{ weight "h.{{i}}.c_attn." -> split("l.{{i}}.q.", "l.{{i}}.k.", "l.{{i}}.v.") '
    f'by (heads * head_dim, kv_heads * head_dim, kv_heads * head_dim) transposed }} }}',
    f'profile p {{ {KIND} hf {{ weight "qkv" -> split("q", "k", "v",) by (head_dim, head_dim, head_dim,) '
    f'interleaved heads  default x = 1 }} }}',
    f'profile p {{ {KIND} hf {{ weight "g" -> split("a", "b") by (heads / kv_heads * head_dim, (head_dim + 1)) '
    f'interleaved kv_heads transposed }} }}',
    f'profile p {{ {KIND} hf {{ map split -> hidden  map interleaved -> heads }} }}',  # both words as names
    f'profile p {{ {KIND} hf {{ weight "a" -> split("q") by (heads) }} }}',  # one part: no split
    f'profile p {{ {KIND} hf {{ weight "a" -> split("q", "k") }} }}',  # no sizes
    f'profile p {{ {KIND} hf {{ weight "a" -> split("q", "k") by (heads, heads) interleaved }} }}',
]


@pytest.mark.parametrize("text", SPLIT_TEXTS)
def test_lark_and_the_fast_parser_agree_on_split_rules(text: str) -> None:
    agree(Source("rules.hpf", text))


@pytest.mark.parametrize("text", SPLIT_TEXTS[:3])
def test_a_split_rule_lowers_to_its_parts_and_sizes_and_formats_to_a_fixed_point(text: str) -> None:
    once = format_source(Source("rules.hpf", text))
    assert format_source(Source("rules.hpf", once)) == once
    assert _rules(once) == _rules(text)


def test_a_split_rule_lowers_to_its_parts_sizes_and_groups() -> None:
    (first,), (second,), (third,) = (_rules(text)[0].weights[:1] for text in SPLIT_TEXTS[:3])
    assert (first.target, first.parts, first.transposed, first.groups) == (
        "l.{i}.q.", ("l.{i}.q.", "l.{i}.k.", "l.{i}.v."), True, None)
    assert [size.text for size in first.sizes] == ["heads * head_dim", "kv_heads * head_dim", "kv_heads * head_dim"]
    assert second.groups is not None and second.groups.text == "heads" and not second.transposed
    assert [size.text for size in third.sizes] == ["heads * head_dim / kv_heads", "head_dim + 1"]  # canonical
    assert 'split("q", "k", "v") by (head_dim, head_dim, head_dim) interleaved heads' in format_source(
        Source("rules.hpf", SPLIT_TEXTS[1]))


# --- unmodelled constructs (issue 21: Gemma-4, DeepSeek-V4) ---
UNMODELLED = [
    f'profile p {{ {KIND} hf {{ unmodelled "hyper-connections" {{ hc_mult  hc_eps = 0  x = "no" }} }} }}',
    f'profile p {{ {KIND} hf "*" {{ ignore "w" {{ a }} unmodelled "c" {{}} read layer_types }} }}',
    f'profile p {{ {KIND} hf {{ unmodelled {{ a }} }} }}',  # no construct named: both parsers refuse it
    f'profile p {{ {KIND} hf {{ default unmodelled = 1 }} }}',  # the keyword as a key, where Lark allows
]


@pytest.mark.parametrize("text", UNMODELLED)
def test_lark_and_the_fast_parser_agree_on_unmodelled(text: str) -> None:
    agree(Source("rules.hpf", text))


def test_an_unmodelled_rule_lowers_to_its_construct_and_its_harmless_value() -> None:
    (rules,) = _rules(UNMODELLED[0])
    assert rules.unmodelled == {"hc_mult": "hyper-connections", "hc_eps": "hyper-connections",
                                "x": "hyper-connections"}
    assert rules.ignored_at == {"hc_eps": 0, "x": "no"} and rules.ignored == {}


@pytest.mark.parametrize("text", UNMODELLED[:2])
def test_fmt_keeps_an_unmodelled_rule(text: str) -> None:
    once = format_source(Source("rules.hpf", text))
    assert "unmodelled " in once and format_source(Source("rules.hpf", once)) == once
    assert _rules(once) == _rules(text)
