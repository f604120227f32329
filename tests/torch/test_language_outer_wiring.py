"""docs/language.md's outer-wiring worked example (OPT-350m, BLOOM-560m), run as the doc shows it.

The section's `.hpf` blocks are written out under the names their first lines give and its
commands run through the real CLI. Each estimate is transformers' count of the same model on the
meta device (its config class built from the compiled model's fields: no published config.json of
either model is in the search index, as the doc says), and `build_model` builds as many. A scaled
copy of each, given transformers' random weights loaded under its profile's `weight` rules (the
doc's opt profile, profiles/bloom.hpf: BLOOM's fused query_key_value a `split ... interleaved heads`),
computes transformers' logits to 1e-4 in float32 on the CPU; the outer wiring's checks are located
diagnostics with hints.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.api import compile_sources  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.ir.nodes import ModelIR  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.model import materialize  # noqa: E402
from hpdsl.torch.weights import load_hf_state_dict  # noqa: E402
from tests.torch import test_language_examples as examples  # noqa: E402
from tests.torch.test_language_examples import _hpdsl, _model  # noqa: E402

SECTION = "### Worked example: OPT-350m and BLOOM-560m"
SMALL = {"hidden": 64, "layers": 2, "heads": 4, "vocab": 101, "ffn_width": 256, "max_positions": 64,
         "embed_width": 32}
"""The scaled copies' dims (BLOOM's feed-forward is 4 × hidden in transformers, so 256)."""


def _section() -> str:
    return examples.doc_section(SECTION)


def _blocks() -> dict[str, str]:
    return examples.doc_blocks(SECTION)


def _commands() -> list[list[str]]:
    return examples.doc_commands(SECTION)


def _hf_config(model: ModelIR) -> Any:
    """Return transformers' config of the model class the example writes, from the compiled model's fields."""
    if model.profile == "opt":
        return transformers.OPTConfig(
            hidden_size=model.hidden, num_hidden_layers=model.layers, num_attention_heads=model.heads,
            vocab_size=model.vocab, ffn_dim=model.ffn_width, max_position_embeddings=model.max_positions,
            word_embed_proj_dim=model.embed_width, do_layer_norm_before=False, activation_function=model.activation,
            enable_bias=bool(model.qkv_bias), tie_word_embeddings=bool(model.tie_embeddings), dropout=0.0)
    assert model.profile == "bloom" and model.ffn_width == 4 * model.hidden and model.alibi and model.embed_norm
    return transformers.BloomConfig(hidden_size=model.hidden, n_layer=model.layers, n_head=model.heads,
                                    vocab_size=model.vocab, tie_word_embeddings=bool(model.tie_embeddings),
                                    layer_norm_epsilon=model.norm_eps)


def _meta_count(config: Any) -> int:
    with torch.device("meta"):
        built = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in built.parameters())


def test_the_doc_shows_both_files_and_the_commands() -> None:
    assert sorted(_blocks()) == ["bloom_560m.hpf", "opt_350m.hpf"]
    assert [c[1] for c in _commands()] == ["compile", "estimate", "estimate", "estimate"]


def test_the_docs_commands_run_and_each_estimate_is_transformers_count(tmp_path: Path) -> None:
    blocks = _blocks()
    for name, body in blocks.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    reports: dict[tuple[str, ...], dict[str, Any]] = {}
    for command in _commands():
        run = _hpdsl(*command[1:], cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        if command[1] == "estimate":
            reports[tuple(command[2:])] = json.loads(run.stdout)
        else:
            assert (tmp_path / command[command.index("-o") + 1]).is_file()
    doc = _section()
    for name in blocks:
        params = reports[(name, "--json")]["params"]
        model, registry = _model(blocks[name], name)
        assert params["total"] == _meta_count(_hf_config(model)), name
        assert sum(p.numel() for p in build_model(model, registry=registry, device="meta").parameters()) \
            == params["total"]
        assert f"params.total {params['total']:,}" in doc
    opt = reports[("opt_350m.hpf", "--json")]["params"]
    assert (opt["embedding"], opt["output"], opt["positions"], opt["final_norms"]) == \
        (50_272 * 512 + 1_024 * 512, 1_024 * 512, 2_050 * 1_024, 0)
    flat = " ".join(doc.split())
    for key in ("embedding", "output", "positions", "final_norms"):
        assert re.search(rf"`params\.{key}` (is )?{opt[key]:,}\b", flat), key
    refused = _hpdsl("estimate", "opt_350m.hpf", "--tp", "8", cwd=tmp_path)
    assert refused.returncode != 0 and "tp 8 does not divide the learned position table's rows 2050" in refused.stderr
    assert "tp 8 does not divide the learned position table's rows 2050" in doc
    # ALiBi: one add per score element, 24 layers x 4,096 queries x 16 heads x 2,048 keys (a causal half).
    bloom, plain = reports[("bloom_560m.hpf", "--json")], reports[("bloom_560m.hpf", "--json", "--set", "alibi=false")]
    assert plain["params"]["total"] == bloom["params"]["total"]
    lower = bloom["flops"]["forward"] - plain["flops"]["forward"]
    assert lower == 24 * 4_096 * 16 * 2_048 and f"{int(lower):,}" in flat


def _scaled(text: str) -> str:
    """Return the example with SMALL's dims in place of its own (its wiring and flags kept)."""
    for field, value in SMALL.items():
        text = re.sub(rf"^(  {field}) \d+$", rf"\1 {value}", text, flags=re.M)
    return text


@pytest.mark.parametrize(("name", "heads"), [("opt_350m.hpf", 4), ("bloom_560m.hpf", 4), ("bloom_560m.hpf", 6)])
def test_a_scaled_copy_computes_transformers_logits(name: str, heads: int) -> None:
    # 6 heads: ALiBi's slopes beyond the largest power of two (BLOOM's extra, odd-indexed terms).
    text = _scaled(_blocks()[name]).replace("  heads 4\n", f"  heads {heads}\n")
    text = re.sub(r"^  (hidden|ffn_width) (\d+)$", lambda m: f"  {m[1]} {int(m[2]) * heads // 4}", text, flags=re.M)
    model, registry = _model(text, name)
    ours = materialize(build_model(model, registry=registry, device="meta"), "cpu", seed=0).eval()
    torch.manual_seed(0)
    config = _hf_config(model)
    config._attn_implementation = "eager"
    theirs = transformers.AutoModelForCausalLM.from_config(config).float().eval()
    with torch.no_grad():
        for parameter in theirs.parameters():  # LayerNorms start at ones and zeros: make every weight bite
            parameter.copy_(torch.randn_like(parameter) * 0.5)
    load_hf_state_dict(ours, theirs.state_dict(), registry.profile(model.profile), model.profile, registry.profiles,
                       model_ir=model)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    ids = torch.randint(0, SMALL["vocab"], (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(input_ids=ids).logits, atol=1e-4, rtol=1e-4)


BAD = {
    "position_offset 2 offsets a learned position table": ("  learned_positions true\n", ""),
    "makes the token table narrower than hidden": ("  no_rope true\n", "  no_rope true\n  mtp 1\n"),
    "a model has one position bias": ("  no_rope true\n", "  alibi true\n  position_buckets 32\n"),
}


@pytest.mark.parametrize("message", sorted(BAD))
def test_an_inconsistent_outer_wiring_is_a_located_diagnostic(tmp_path: Path, message: str) -> None:
    old, new = BAD[message]
    text = _blocks()["opt_350m.hpf"]
    assert old in text
    (tmp_path / "bad.hpf").write_text(text.replace(old, new), encoding="utf-8")
    run = _hpdsl("compile", "bad.hpf", cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "error[outer-wiring]" in run.stderr and message in run.stderr and "hint:" in run.stderr
    assert re.search(r"bad\.hpf:\d+:\d+: error\[outer-wiring\]", run.stderr)


def test_pipeline_stages_and_sequence_parallelism_refuse_the_outer_wiring_by_name() -> None:
    from hpdsl.torch import pipeline, sequence

    opt, _ = _model(_blocks()["opt_350m.hpf"], "opt_350m.hpf")
    bloom, _ = _model(_blocks()["bloom_560m.hpf"], "bloom_560m.hpf")
    for refusals in (pipeline.model_refusals, sequence.model_refusals):
        assert any("['embed_width', 'no_final_norm', 'position_offset']" in r for r in refusals(opt))
        assert any("['embed_norm']" in r for r in refusals(bloom))


NOPE = """
profile nope {
  default rope_layer
  kind rope_layer {
    ops { attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }
  }
  kind nope_layer from rope_layer {
    dims { no_rope = 1 }
  }
}

model m : nope {
  hidden 64
  layers 2
  heads 4
  vocab 101
  ffn_width 128
  stack [rope_layer, nope_layer]
}
"""


def test_a_kinds_dims_make_no_position_layers() -> None:
    """A no-position layer's last query sees its earlier keys as a set: reordering them leaves its output as it is."""
    model, registry = _model(NOPE, "nope.hpf")
    built = materialize(build_model(model, registry=registry, device="meta"), "cpu", seed=0).eval()
    x = torch.randn(1, 6, 64, generator=torch.Generator().manual_seed(2))
    shuffled = torch.cat([x[:, [3, 0, 4, 1, 2]], x[:, 5:]], dim=1)
    last = {}
    with torch.no_grad():
        for index, layer in enumerate(built.layers):
            last[index] = (layer.mixer(x)[0, -1], layer.mixer(shuffled)[0, -1])
    assert [layer.mixer.config.no_rope for layer in built.layers] == [False, True]
    torch.testing.assert_close(*last[1])
    assert not torch.allclose(*last[0], atol=1e-4)


def test_tp_2_splits_the_tables_by_rows_and_keeps_the_projections_whole() -> None:
    """OPT-350m on a fake tp 2 (this process rank 1): the tables split by rows, project_in and project_out whole.

    tp 2, not 8: the position table's 2,050 rows split only over a divisor of 2,050.
    """
    from torch.distributed.tensor import DTensor
    from torch_support import process_group

    from hpdsl.torch import get_family_build_info

    model, registry = _model(_blocks()["opt_350m.hpf"], "opt_350m.hpf")
    with process_group(2, rank=1, fake=True):
        from torch.distributed.device_mesh import init_device_mesh

        built = build_model(model, init_device_mesh("cpu", (2,), mesh_dim_names=("tp",)), registry=registry)
        shapes = {name: {p.name: (p.logical_shape, p.local_shape) for p in info.layout.parameters}
                  for name in ("embed", "project_in", "project_out")
                  if (info := get_family_build_info(getattr(built, name))) is not None and info.layout is not None}
        assert shapes["embed"]["weight"] == ((50_272, 512), (50_272 // 2, 512))
        assert shapes["project_in"]["weight"] == ((1_024, 512), (1_024, 512))
        assert shapes["project_out"]["weight"] == ((512, 1_024), (512, 1_024))
        assert not isinstance(built.project_in.weight, DTensor) or built.project_in.weight.placements[0].is_replicate()
        positions = get_family_build_info(built.positions)
        assert positions is not None and positions.logical_shapes["weight"] == (2_050, 1_024)
