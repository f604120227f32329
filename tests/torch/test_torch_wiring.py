"""Block wiring and partial rotary against transformers: the same weights give the same logits.

A published config (tests/data/hf/: Phi-2, OLMo-3.1-32B) is scaled down to a few
small layers, imported with hpdsl's importer and built by hpdsl.torch.build_model;
transformers builds the same small config with random weights, which are copied
into hpdsl's model under the profiles' weight rules (tests/torch/hf_pair.py). In float32 on the CPU both models give the same logits to
1e-4: Phi's parallel block with one shared LayerNorm and a partial rotary
embedding, OLMo-3's norms after each sublayer with a full-width QK-norm. The
parallel block's saved activations agree with the estimator (one norm output
kept for both halves).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.api import compile_paths, compile_sources  # noqa: E402
from hpdsl.bound.wiring import norm_paths  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.model.fields import WIRINGS  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.model import materialize  # noqa: E402
from hpdsl.torch.modules.fused import rotate  # noqa: E402
from tests.importers.hf_configs import published  # noqa: E402
from tests.torch.hf_pair import hf_pair  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SEQ = 12

SMALL = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 101, "max_position_embeddings": 64}
"""The dims every scaled config takes (its structure, flags and key names stay the published file's)."""

@pytest.fixture(scope="module")
def stdlib() -> Registry:
    return compile_paths([ROOT / "profiles", ROOT / "families"])


def _scaled(name: str, **changes: Any) -> dict[str, Any]:
    """Return a published config at SMALL dims, its norms' eps hpdsl's (1e-6), no token ids."""
    config = {**published(name), **SMALL, **changes}
    for key in ("layer_norm_eps", "rms_norm_eps"):
        if key in config:
            config[key] = 1e-6
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):  # ids past the small vocabulary
        config.pop(key, None)
    if "layer_types" in config:
        config["layer_types"] = config["layer_types"][: config["num_hidden_layers"]]
    return config


def _pair(config: dict[str, Any], stdlib: Registry) -> tuple[Any, Any, Registry]:
    """Return (hpdsl model, transformers model, registry) with transformers' random weights in both."""
    ours, theirs, registry = hf_pair(config, stdlib=stdlib)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    return ours, theirs, registry


@pytest.mark.parametrize(("name", "changes"), [
    ("phi_2", {}),  # partial_rotary_factor 0.4 of head dim 16: 6 rotary dims
    # Four layers: three sliding, one full; hpdsl's rotary base (10000) on both kinds.
    ("olmo_3_1_32b_instruct", {"num_hidden_layers": 4, "rope_scaling": None, "sliding_window": 64,
                               "rope_parameters": {kind: {"rope_type": "default", "rope_theta": 10000.0}
                                                   for kind in ("sliding_attention", "full_attention")}}),
], ids=["phi_2", "olmo_3"])
def test_logits_equal_transformers(name: str, changes: dict[str, Any], stdlib: Registry) -> None:
    ours, theirs, _ = _pair(_scaled(name, **changes), stdlib)
    ids = torch.randint(0, SMALL["vocab_size"], (2, SEQ), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = theirs(input_ids=ids).logits
        found = ours(ids)
    torch.testing.assert_close(found, expected, atol=1e-4, rtol=1e-4)


def test_a_sequential_wiring_of_phis_weights_gives_other_logits(stdlib: Registry) -> None:
    """The wiring is what the layer runs: Phi's weights wired parallel_two_norms give other logits."""
    ours, theirs, _ = _pair(_scaled("phi_2"), stdlib)
    ids = torch.randint(0, SMALL["vocab_size"], (1, SEQ), generator=torch.Generator().manual_seed(2))
    for layer in ours.layers:
        layer.wiring, layer.ffn_norm = "parallel_two_norms", torch.nn.LayerNorm(SMALL["hidden_size"])
    with torch.no_grad():
        assert not torch.allclose(ours(ids), theirs(input_ids=ids).logits, atol=1e-3)


def test_partial_rotary_matches_transformers_rotate_half() -> None:
    from transformers.models.phi.modeling_phi import apply_rotary_pos_emb

    head_dim, dims, seq = 16, 6, 9
    q, k = torch.randn(2, 3, seq, head_dim), torch.randn(2, 3, seq, head_dim)  # transformers: [b, heads, s, d]
    positions = torch.arange(seq)
    inverse = 1.0 / (10000.0 ** (torch.arange(0, dims, 2, dtype=torch.float32) / dims))
    angles = torch.cat([positions[:, None] * inverse[None, :]] * 2, dim=-1)[None]
    q_rot, k_rot = apply_rotary_pos_emb(q[..., :dims], k[..., :dims], angles.cos(), angles.sin())
    expected = torch.cat([q_rot, q[..., dims:]], dim=-1)
    found = rotate(q.transpose(1, 2), positions, inverse).transpose(1, 2)  # hpdsl: [b, s, heads, d]
    torch.testing.assert_close(found, expected)
    assert torch.equal(found[..., dims:], q[..., dims:])


def test_parallel_block_saves_one_norm_output(stdlib: Registry) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from agreement import agreement, small_model

    imported = import_hf_config(published("phi_2"), profiles=stdlib.profiles, name="phi_2")
    registry = compile_sources([Source("phi_2.hpf", imported.text)])
    small = small_model(registry.models["phi_2"])
    rows = [r for r in agreement(small, registry, seq_len=64) if r.quantity == "saved bytes"]
    assert rows and all(abs(r.relative) < 0.01 for r in rows), rows
    built = build_model(small, registry=registry)
    assert sum(p.numel() for p in built.parameters()) == parameters(bind(small, registry.profile("phi"))).total


@pytest.mark.parametrize("wiring", WIRINGS)
def test_every_wiring_builds_with_the_estimators_count_and_trains(wiring: str, stdlib: Registry) -> None:
    norms = len(norm_paths(wiring, 1, True))
    text = (f"model wired : llama2 {{\n  hidden 32  layers 2  heads 4  kv_heads 2  vocab 50  ffn_width 48\n"
            f"  wiring {wiring}  layer_norms {norms}\n}}\n")
    registry = compile_sources([Source("wired.hpf", text)])
    model = registry.models["wired"]
    built = materialize(build_model(model, registry=registry, device="meta"), "cpu", seed=0)
    assert sum(p.numel() for p in built.parameters()) == parameters(bind(model, registry.profile("llama2"))).total
    held = {name.split(".")[2] for name, _ in built.named_parameters() if name.startswith("layers.0.") and
            name.split(".")[2].endswith("norm")}
    assert held == {path for _, path in norm_paths(wiring, 1, True)}
    ids = torch.randint(0, 50, (2, SEQ), generator=torch.Generator().manual_seed(3))
    built(ids).logsumexp(-1).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in built.parameters())


def test_post_norm_normalises_after_the_residual_add_sublayer_post_norm_before() -> None:
    from hpdsl.torch.layers import DecoderLayer

    torch.manual_seed(4)
    ffn, x = torch.nn.Linear(8, 8), torch.randn(2, 5, 8) + 3.0
    after = DecoderLayer(ffn=ffn, wiring="post_norm", norms={"ffn_post_norm": torch.nn.LayerNorm(8)})
    before = DecoderLayer(ffn=ffn, wiring="sublayer_post_norm", norms={"ffn_post_norm": torch.nn.LayerNorm(8)})
    positions = torch.arange(5)
    with torch.no_grad():
        torch.testing.assert_close(after(x, positions=positions), torch.nn.functional.layer_norm(x + ffn(x), (8,)))
        torch.testing.assert_close(before(x, positions=positions), x + torch.nn.functional.layer_norm(ffn(x), (8,)))
