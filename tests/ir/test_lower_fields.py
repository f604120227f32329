"""Field declarations into the IR: a profile's and a family's fields, a model's `extra`, and registry.json.

An author field lowers to the same Field record the standard ones are (hpdsl/model/fields.py);
a model carries the author fields it may state in `extra` (stated, else their defaults), and the
registry round-trips them through the one converter, omitting empty tables.
"""

from __future__ import annotations

import json

from hpdsl.api import check_sources
from hpdsl.diagnostics import Source
from hpdsl.ir.convert import registry_from_data, registry_to_json
from hpdsl.ir.nodes import RegistryIR
from hpdsl.model.fields import Field

OPS = "ops { attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }"
SPEC = f"""profile opt_like {{
  field word_embed_proj_dim: int >= 1 hf(word_embed_proj_dim) "the width of OPT's projected embedding"
  field residual_scale: float = 1.0 "the scale of each residual branch"
  kind decoder {{ {OPS} }}
}}

family projections {{
  factory "hpdsl.torch.modules:GatedMLP"
  field proj_rank: int >= 1 <= 4096 = 16 "the family's own rank"
  variant v "hpdsl.torch.modules:GatedMLP" default params(p)
  layout {{ p.weight (proj_rank, word_embed_proj_dim) replicate }}
}}

model opt_small : opt_like {{
  hidden 64  layers 1  heads 4  vocab 96  ffn_width 128
  word_embed_proj_dim 32
}}
"""


def registry(text: str = SPEC) -> RegistryIR:
    result = check_sources([Source("spec.hpf", text)], stdlib=True)
    assert [d for d in result.diagnostics if d.is_error] == []
    assert result.registry is not None
    return result.registry.ir


def test_a_profile_and_a_family_hold_the_fields_they_declare() -> None:
    compiled = registry()
    assert compiled.profiles["opt_like"].fields == (
        Field("word_embed_proj_dim", "int", "the width of OPT's projected embedding", None, 1, None, False,
              ("word_embed_proj_dim",), (), 1 << 31),
        Field("residual_scale", "float", "the scale of each residual branch", None, None, 1.0))
    assert compiled.families["projections"].fields == (
        Field("proj_rank", "int", "the family's own rank", None, 1, 16, maximum=4096),)
    # Besides the author's, only the standard profiles that declare a field of their own (MiniMax-M2's
    # rotary_dim, Gemma 4's double_wide_mlp).
    assert {name for name, p in compiled.profiles.items() if p.fields} == {"opt_like", "minimax_m2", "gemma4"}


def test_a_model_carries_its_author_fields_stated_or_defaulted() -> None:
    model = registry().models["opt_small"]
    assert model.extra == {"word_embed_proj_dim": 32, "residual_scale": 1.0, "proj_rank": 16}
    stated = registry(SPEC.replace("word_embed_proj_dim 32", "word_embed_proj_dim 32  proj_rank 4"))
    assert stated.models["opt_small"].extra["proj_rank"] == 4


def test_the_registry_round_trips_author_fields_and_omits_them_where_none_are_declared() -> None:
    compiled = registry()
    text = registry_to_json(compiled)
    assert registry_from_data(json.loads(text)) == compiled
    data = json.loads(text)
    assert "fields" in data["profiles"]["opt_like"] and "fields" not in data["profiles"]["llama2"]
    assert data["models"]["opt_small"]["extra"] == {"word_embed_proj_dim": 32, "residual_scale": 1.0,
                                                    "proj_rank": 16}
    assert data["profiles"]["opt_like"]["fields"][0] == {
        "name": "word_embed_proj_dim", "type": "int", "meaning": "the width of OPT's projected embedding",
        "minimum": 1, "hf": ["word_embed_proj_dim"], "maximum": 1 << 31}


def test_the_bound_config_reads_author_fields_as_layout_dims() -> None:
    from hpdsl.bound.bind import base_config
    from hpdsl.bound.config import dim_environment

    compiled = registry()
    model = compiled.models["opt_small"]
    env = dim_environment(base_config(model, compiled.profiles["opt_like"]))
    assert (env["word_embed_proj_dim"], env["proj_rank"], env["hidden"]) == (32, 16, 64)
    assert "residual_scale" not in env  # a float is no dim
