"""Mllama's cross-attention layers against transformers: the same weights and stream give the same logits.

The model is the published Llama-3.2-90B-Vision config (tests/data/hf/llama_3_2_90b_vision.json,
meta-llama/Llama-3.2-90B-Vision-Instruct's config.json; tests/data/hf/SOURCES.md) with its text_config
scaled down (SMALL: five layers, cross-attention at layers 1 and 3), its norms' eps the file's,
and the default rotary embedding at hpdsl's base (10000), a visible transformation of the published
file. hpdsl imports it (profiles/mllama.hpf) and builds it; transformers' MllamaForCausalLM builds the
same text_config with random weights, which are copied into hpdsl's model under the profile's weight
rules (hpdsl.torch.weights.load_hf_state_dict). Given one random stream of `hidden` wide
tokens (a vision tower's projected output, as MllamaModel feeds it), both give the same logits to
1e-4 in float32 on the CPU; given none, both skip the cross-attention layers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.api import compile_paths, compile_sources  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.model import materialize  # noqa: E402
from hpdsl.torch.weights import load_hf_state_dict  # noqa: E402
from tests.importers.hf_configs import published  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BATCH, SEQ, STREAM = 2, 10, 6

SMALL = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 5, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 101, "cross_attention_layers": [1, 3],
         "rope_scaling": None, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
"""The scaled text_config keys; the padding id (past the small vocabulary) becomes null."""

@pytest.fixture(scope="module")
def stdlib() -> Registry:
    return compile_paths([ROOT / "profiles", ROOT / "families"])


def _config(**changes: Any) -> dict[str, Any]:
    config = published("llama_3_2_90b_vision")
    text = {k: v for k, v in config["text_config"].items() if k not in ("rope_theta",)}
    text.update(SMALL, **changes)
    text["pad_token_id"] = None  # transformers' padding row must lie in the small vocabulary
    config["text_config"] = text
    return config


def _registry(config: dict[str, Any], stdlib: Registry) -> Registry:
    imported = import_hf_config(config, profiles=stdlib.profiles, name="scaled")
    return compile_sources([Source("scaled.hpf", imported.text)])


def _transformers(config: dict[str, Any]) -> Any:
    text = {k: v for k, v in config["text_config"].items() if k not in ("architectures", "model_type")}
    torch.manual_seed(0)
    hf_config = transformers.MllamaTextConfig(**text)
    hf_config._attn_implementation = "eager"
    theirs = transformers.MllamaForCausalLM(hf_config).float().eval()
    with torch.no_grad():  # transformers starts its gates at 0; nonzero gates let the cross layers count
        for name, parameter in theirs.named_parameters():
            if name.endswith(("cross_attn_attn_gate", "cross_attn_mlp_gate")):
                parameter.uniform_(0.3, 1.2)
    return theirs


@pytest.fixture(scope="module")
def pair(stdlib: Registry) -> tuple[Any, Any, Registry]:
    """Return (hpdsl model, transformers model, registry) with transformers' random weights in both."""
    config = _config()
    registry = _registry(config, stdlib)
    ours = materialize(build_model(registry.models["scaled"], registry=registry, device="meta"), "cpu", seed=0)
    theirs = _transformers(config)
    load_hf_state_dict(ours, theirs.state_dict(), registry.profile("mllama"), "mllama_text_model", registry.profiles)
    return ours.eval(), theirs, registry


def test_the_scaled_model_has_transformers_count_estimated_and_built(pair: tuple[Any, Any, Registry]) -> None:
    ours, theirs, registry = pair
    model = registry.models["scaled"]
    assert [(g.kind, g.count) for g in model.groups] == [
        ("full_attention", 1), ("cross_attention", 1), ("full_attention", 1), ("cross_attention", 1),
        ("full_attention", 1)]
    estimated = parameters(bind(model, registry.profile("mllama"), families=registry.families)).total
    assert estimated == sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    assert ours.embed.weight.shape == (101 + 8, 64) and ours.head.weight.shape == (101, 64)
    crossing = {name for name, _ in ours.layers[1].named_parameters()}
    assert {"cross_gate.weight", "ffn_gate.weight", "cross_attention.q_norm.weight",
            "cross_attention.k_norm.weight"} <= crossing
    assert not any(name.startswith("mixer") for name in crossing)


def test_logits_over_a_stream_equal_transformers(pair: tuple[Any, Any, Registry]) -> None:
    ours, theirs, _ = pair
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 101, (BATCH, SEQ), generator=generator)
    stream = torch.randn(BATCH, STREAM, 64, generator=generator)
    with torch.no_grad():
        expected = theirs(input_ids=ids, cross_attention_states=stream, use_cache=False).logits
        found = ours(ids, stream)
        other = ours(ids, torch.randn(BATCH, STREAM, 64, generator=generator))
    torch.testing.assert_close(found, expected, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(found, other, atol=1e-3)  # the stream is what the cross layers read


def test_without_a_stream_the_cross_layers_pass_through_as_transformers(pair: tuple[Any, Any, Registry]) -> None:
    ours, theirs, _ = pair
    ids = torch.randint(0, 101, (1, SEQ), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = theirs(input_ids=ids, use_cache=False).logits
        found = ours(ids)
    torch.testing.assert_close(found, expected, atol=1e-4, rtol=1e-4)


def test_tp_splits_the_cross_attention_by_heads_and_keeps_norms_and_gates_whole(stdlib: Registry) -> None:
    """A fake 2-rank tp job: q/k/v/o split by heads, the per-head norms and the gates whole on each rank."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    from hpdsl.errors import BuildError
    from torch_support import process_group

    registry = _registry(_config(vocab_size=120), stdlib)  # 128 embedding rows: tp 2 splits them
    odd = _registry(_config(), stdlib)  # 101 + 8 = 109 rows: no tp 2 split
    with process_group(2, rank=1, fake=True):
        mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
        built = build_model(registry.models["scaled"], mesh, registry=registry)
        with pytest.raises(BuildError, match=r"embed: .*dim 0 has size 109, and 109 is not a multiple of tp=2"):
            build_model(odd.models["scaled"], mesh, registry=odd)
    layer = dict(built.layers[1].named_parameters())
    split = {name: p.to_local().shape[0] for name, p in layer.items() if isinstance(p, DTensor)}
    assert split["cross_attention.q_proj.weight"] == 4 * 16 // 2 and split["cross_attention.k_proj.weight"] == 16
    whole = {name for name, p in layer.items() if not isinstance(p, DTensor)}
    assert whole == {"cross_norm.weight", "ffn_norm.weight", "cross_gate.weight", "ffn_gate.weight",
                     "cross_attention.q_norm.weight", "cross_attention.k_norm.weight"}


def test_over_a_stream_as_long_as_the_text_the_matmul_flops_are_the_estimate(pair: tuple[Any, Any, Registry]) -> None:
    """The estimator prices a cross layer as one attention over a stream of the sequence's length: so it runs."""
    from torch.utils.flop_counter import FlopCounterMode

    from hpdsl.cost.formulas.flops import MATMUL_TERMS, forward_flops_by_term

    _, _, registry = pair
    model = registry.models["scaled"]
    cost = bind(model, registry.profile("mllama"), families=registry.families)
    terms = forward_flops_by_term(cost, batch=BATCH, seq_len=SEQ)
    estimate = sum(terms[c].get(t, 0.0) for c in [*cost.layer_kinds(), "output"] for t in MATMUL_TERMS)
    eager = {"attention": {"backend": "eager"}, "cross_attention": {"backend": "eager"}}
    built = materialize(build_model(model, registry=registry, device="meta", selectors=eager), "cpu", seed=0)
    ids = torch.randint(0, 101, (BATCH, SEQ), generator=torch.Generator().manual_seed(3))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        built(ids, torch.randn(BATCH, SEQ, 64))
    assert counter.get_total_flops() == estimate


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_gated_blocks_under_tp2_sequence_parallel_match_one_process() -> None:
    """`wiring gated` on a scaled Llama-3: each gate's gradient sums over the tp ranks' sequence chunks."""
    from train_support import matches_one_process, train_json

    small = [f"--set={pair}" for pair in ("layers=2", "hidden=64", "heads=4", "kv_heads=2", "vocab=128",
                                          "ffn_width=96", "wiring=gated")]
    result = train_json(str(ROOT / "examples" / "llama3_8b.hpf"), *small, "--nproc", "2", "--steps", "2",
                        "--tp", "2", "--sp")
    matches_one_process(result)
