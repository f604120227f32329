"""A slot's tally is its family's layout on its config; a slot the estimator cannot price is refused at compile.

The variant tallied is the one the family's rules choose for the slot's
config-named selectors at every axis 1 (hpdsl/bound/tally.py), and an entry's
`if` decides whether it counts; `hpdsl compile` exits 1 with a located
diagnostic for a slot bound to a family without a layout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hpdsl.api import compile_sources
from hpdsl.bound.config import LayerConfig
from hpdsl.bound.slots import Slot
from hpdsl.bound.tally import priced_variant, slot_tally

STANDARD = compile_sources([]).families


def test_the_mlp_tally_follows_the_variant_the_model_chooses_and_the_bias_flag() -> None:
    mlp = STANDARD["mlp"]
    gated = LayerConfig(hidden=8, ffn_width=24, mlp="gated", mlp_bias=False)
    plain = LayerConfig(hidden=8, ffn_width=24, mlp="plain", mlp_bias=True)
    assert (priced_variant(mlp, gated), priced_variant(mlp, plain)) == ("gated", "plain")
    gated_tally = slot_tally(Slot("mlp", "ffn", gated, "mlp"), STANDARD)
    plain_tally = slot_tally(Slot("mlp", "ffn", plain, "mlp"), STANDARD)
    assert gated_tally is not None and gated_tally.params == 3 * 8 * 24
    assert plain_tally is not None and plain_tally.params == 2 * 8 * 24 + 24 + 8


def test_mla_counts_q_proj_without_a_query_latent_and_the_latent_with_one() -> None:
    config = LayerConfig(hidden=16, heads=2, kv_heads=2, head_dim=4, nope_dim=4, rope_dim=2, kv_lora_rank=8)
    direct = slot_tally(Slot("mla", "mixer", config, "mla"), STANDARD)
    latent = slot_tally(Slot("mla", "mixer", LayerConfig(**{**_values(config), "q_lora_rank": 6}), "mla"), STANDARD)
    assert direct is not None and latent is not None
    assert dict(direct.by_path)["q_proj.weight"] == 2 * 6 * 16 and dict(direct.by_path)["q_a_proj.weight"] == 0
    assert dict(latent.by_path)["q_proj.weight"] == 0
    assert latent.params - direct.params == 6 * 16 + 6 + 2 * 6 * 6 - 2 * 6 * 16


def test_the_experts_are_tallied_whole_at_ep_1() -> None:
    config = LayerConfig(hidden=8, ffn_width=4, experts=6, gated=False)
    tally = slot_tally(Slot("experts", "ffn.experts", config, "grouped_experts"), STANDARD)
    assert tally is not None and tally.params == 6 * 8 * 4 + 6 * 4 * 8  # up_proj (not gated), down_proj


def test_compile_refuses_a_slot_bound_to_a_family_without_a_layout(tmp_path: Path) -> None:
    spec = tmp_path / "bare.hpf"
    spec.write_text('family bare_norm {\n  factory "pkg.mod:N"\n  variant only "pkg.mod:N" default\n}\n'
                    "profile p {\n  slots { norm bare_norm }\n  kind layer {\n    ops { attMM 4  attBMM 2  ffMM 3  "
                    "softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }\n  }\n}\n"
                    "model m : p { hidden 64  layers 2  heads 4  vocab 100  ffn_width 128 }\n")
    run = subprocess.run([sys.executable, "-m", "hpdsl", "compile", str(spec), "-o", str(tmp_path / "r.json")],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stderr
    assert "error[unpriced-slot]" in run.stderr and "bare.hpf:" in run.stderr
    assert "family 'bare_norm', which declares no layout" in run.stderr and "hint:" in run.stderr


def _values(config: LayerConfig) -> dict[str, object]:
    return {a.name: getattr(config, a.name) for a in type(config).__attrs_attrs__}
