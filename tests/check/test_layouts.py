"""Layout checks: the tp values a family allows, exact messages, and the slot table both sides read.

The error codes themselves are pinned by tests/cases/layout/*.hpf; these tests
pin the tp analysis, the counterexample text, and the standard families.
"""

from __future__ import annotations

import attrs

from hpdsl import ast
from hpdsl.check import check_files
from hpdsl.check.divisibility import variant_tp_values
from hpdsl.diagnostics import Source
from hpdsl.ir.lower_families import lower_family
from hpdsl.resources import stdlib_files
from hpdsl.bound.config import DIM_NAMES, ModuleConfig
from hpdsl.syntax import parse_source, parse_text


def tp_values(body: str) -> dict[str, tuple[int, ...]] | None:
    family = parse_text(f'family f {{\nfactory "p.m:F"\n{body}\n}}').items[0]
    assert isinstance(family, ast.Family)
    return variant_tp_values(lower_family(family))


def test_tp_is_unbounded_unless_the_requires_bound_it() -> None:
    assert tp_values('variant v "p.m:V" default') is None
    assert tp_values('require tp > 1 -> cp == 1\nvariant v "p.m:V" default') is None
    assert tp_values('parallel tp\nvariant v "p.m:V" default\nvariant w "p.m:W" when parallel') is None


def test_bounded_tp_values_are_listed_per_variant() -> None:
    body = """
      selector fast: bool
      require tp in (1, 2, 4, 8)
      require fast -> tp <= 2
      variant v "p.m:V" default
      variant w "p.m:W" when fast
    """
    assert tp_values(body) == {"v": (2, 4, 8), "w": (2,)}
    assert tp_values('require tp == 1\nvariant v "p.m:V" default') == {}
    assert tp_values('require tp <= 3\nvariant v "p.m:V" default') == {"v": (2, 3)}


SPECS = """
vocabulary {
  attMM "attention projections"
  ffMM  "feed-forward projections"
}
// without the standard library, a profile a model uses must bind every slot
slots {
  attention mlp  linear_attention mlp  mla mlp  mlp mlp  experts mlp  shared_experts mlp  router mlp  shared_gate mlp
  norm mlp  embedding mlp  head mlp
}
profile p {
  kind dense {
    ffn dense
    ops { attMM 4  ffMM 3 }
  }
  kind moe from dense { ffn moe }
  default dense
}
family mlp {
  factory "p.m:MLP"
  require tp in (1, 2, 4)
  variant gated "p.m:G" default params(up)
  layout {
    up.weight (ffn_width, hidden) colwise
  }
}
model ok : p {
  hidden 64  layers 2  heads 4  vocab 10  ffn_width 64  layer_norms 2
  moe { experts 4  top_k 1  expert_width 32  shared_experts 1  shared_width 24 }
  stack [dense, moe]
}
"""


def test_a_counterexample_names_the_model_the_parameter_the_size_and_tp() -> None:
    # The shared expert (width 24) splits over 2 and 4; the dense MLP (64) too; the expert width
    # belongs to the experts family, not mlp: only mlp slots are judged.
    _, diagnostics = check_files([parse_source(Source("s.hpf", SPECS))])
    assert [d.code for d in diagnostics if d.is_error] == []
    bad = SPECS.replace("shared_width 24", "shared_width 18")
    _, diagnostics = check_files([parse_source(Source("s.hpf", bad))])
    (error,) = [d for d in diagnostics if d.is_error]
    assert error.code == "shard-not-divisible"
    assert error.message == ("at tp=4, model 'ok' cannot split dim 0 of 'up.weight' (ffn_width = 18): "
                             "18 is not a multiple of tp=4")
    assert error.hint is not None and "`require tp in (1, 2)`" in error.hint
    assert error.notes[0].message == "model 'ok' fills slot 'ffn.shared_experts.0' with this family in its 'moe' layers"


def test_a_model_with_errors_is_not_judged() -> None:
    bad = SPECS.replace("ffn_width 64", "ffn_width 63  bogus 1").replace("shared_width 24", "shared_width 18")
    _, diagnostics = check_files([parse_source(Source("s.hpf", bad))])
    assert [d.code for d in diagnostics if d.is_error] == ["unknown-field"]


def test_the_standard_library_checks_clean_and_every_family_has_a_layout() -> None:
    files = [parse_source(Source(name, path.read_text())) for name, path in stdlib_files()]
    scope, diagnostics = check_files(files)
    assert not [d for d in diagnostics if d.is_error]
    for family in scope.families.values():
        assert lower_family(family).layout, family.name.value
    bound = {b.family.value for item in (i for f in scope.files for i in f.items)
             if isinstance(item, ast.SlotsBlock) for b in item.bindings}
    assert bound <= set(scope.families)  # every standard slot binding names a standard family


def test_dims_read_the_int_and_bool_fields_of_the_slot_config() -> None:
    fields = {f.name: f.type for f in attrs.fields(ModuleConfig)}
    assert set(DIM_NAMES) == {name for name, type_ in fields.items() if type_ in (int, bool)}
    assert {"hidden", "heads", "head_dim", "kv_heads", "ffn_width", "experts", "output_gate"} <= set(DIM_NAMES)
