"""A family and a slot binding written in .hpf alone change what build_model builds and explain names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from torch import nn

from hpdsl.api import compile_sources
from hpdsl.cost import bind, parameters
from hpdsl.diagnostics import Source
from hpdsl.torch import build_model, collect_family_modules, get_family_build_info
from hpdsl.torch.modules import LayerNorm

VECTOR = "attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0"

SPEC = f"""
// An author's own norm family: RMSNorm or LayerNorm by a selector the model's `norm` field sets.
family my_norm {{
  factory "hpdsl.torch.modules:RMSNorm"
  selector norm: enum(rmsnorm, layernorm) = rmsnorm
  variant rms "hpdsl.torch.modules:RMSNorm" default when norm == rmsnorm params(weight, bias)
  variant ln "hpdsl.torch.modules:LayerNorm" when norm == layernorm params(weight, bias)
  layout {{
    weight (hidden) replicate
    bias   (hidden) replicate
  }}
}}

// A profile that binds its norms to it; every other slot keeps the standard binding.
profile my_llama {{
  model_types "my_llama"
  default decoder
  slots {{ norm my_norm }}
  kind decoder {{
    ops {{ {VECTOR} }}
  }}
}}

model mine : my_llama {{
  hidden 64  layers 2  heads 4  vocab 128  ffn_width 96
  norm layernorm  norm_bias
}}
"""


def test_a_norm_family_bound_in_hpdf_builds_every_norm_and_prices_exactly() -> None:
    registry = compile_sources([Source("mine.hpf", SPEC)])
    built = build_model("mine", registry=registry)
    norms = [b for b in collect_family_modules(built) if b.info.resolved.family.name == "my_norm"]
    # two per layer and the final norm, each the LayerNorm variant the model's `norm` field chose
    assert sorted(fqn for b in norms for fqn in b.fqns) == [
        "layers.0.ffn_norm", "layers.0.mixer_norm", "layers.1.ffn_norm", "layers.1.mixer_norm", "norm"]
    assert all(b.info.resolved.variant.name == "ln" and type(b.module) is LayerNorm for b in norms)
    info = get_family_build_info(built.layers[0].mixer_norm)
    assert info is not None and info.source is not None and info.source.file == "mine.hpf"
    model = registry.model("mine")
    # the slots are priced from the registry's families' layouts (my_norm is not a standard family)
    total = parameters(bind(model, registry.profile(model.profile), families=registry.families)).total
    assert sum(p.numel() for p in built.parameters()) == total


def test_the_standard_binding_stays_for_other_profiles() -> None:
    registry = compile_sources([Source("mine.hpf", SPEC + """
model theirs : llama2 { hidden 64  layers 2  heads 4  vocab 128  ffn_width 96 }
""")])
    built = build_model("theirs", registry=registry)
    info = get_family_build_info(built.layers[0].mixer_norm)
    assert info is not None and info.resolved.family.name == "norm"
    assert isinstance(built.layers[0].mixer_norm, nn.Module)


def test_explain_names_the_authors_family(tmp_path: Path) -> None:
    spec = tmp_path / "mine.hpf"
    spec.write_text(SPEC)
    run = subprocess.run([sys.executable, "-m", "hpdsl", "explain", str(spec), "--path", "layers.1.ffn_norm"],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    first = run.stdout.splitlines()[0]
    assert first.startswith("layers.1.ffn_norm: family my_norm, variant ln (hpdsl.torch.modules:LayerNorm)")
    assert "mine.hpf" in run.stdout and "norm=layernorm" in run.stdout
