"""The mamba family against transformers' Jamba: the mixer's numbers, a scaled model's parameters, FLOPs.

A scaled Jamba (hidden 64, eight layers: seven Mamba, one attention, MoE every
other layer) is built by hpdsl and by transformers on CPU. The reference mixer
computes what JambaMambaMixer computes from the same weights; the built model
trains; its forward matmul FLOPs equal the estimator's exactly, and
transformers' equal them plus the convolution outputs its padding computes and
drops (docs/validation.md, "Mamba layers").
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from hpdsl.api import compile_sources  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.cost.formulas.flops import MATMUL_TERMS, forward_flops_by_term  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.modules import Mamba, Mamba2  # noqa: E402

SMALL = """
model jamba_small : jamba {
  hidden 64
  layers 8
  heads 4
  kv_heads 2
  vocab 128
  ffn_width 96
  moe { experts 4  top_k 2  expert_width 96 }
  ssm { ssm_state 8  ssm_conv 4  ssm_expand 2  ssm_dt_rank 4  ssm_conv_bias  ssm_norms }
  stack [mamba_dense, mamba_moe, mamba_dense, mamba_moe, attention_dense, mamba_moe, mamba_dense, mamba_moe]
}
"""
HF_SMALL = dict(hidden_size=64, num_hidden_layers=8, intermediate_size=96, num_attention_heads=4,
                num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, mamba_d_state=8, mamba_d_conv=4,
                mamba_expand=2, mamba_dt_rank=4, vocab_size=128, use_mamba_kernels=False,
                attn_implementation="eager", experts_implementation="eager")
"""The same model for transformers, on its eager paths (FlopCounterMode sees every matmul of them)."""
BATCH, SEQ = 2, 16


@pytest.fixture(scope="module")
def registry() -> Registry:
    return compile_sources([Source("jamba_small.hpf", SMALL)])


@pytest.fixture(scope="module")
def hf_model():
    torch.manual_seed(0)
    return transformers.JambaForCausalLM(transformers.JambaConfig(**HF_SMALL)).eval()


def _built(registry: Registry) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(registry.models["jamba_small"], registry=registry, device="cpu",
                       selectors={"attention": {"backend": "eager"}})


def test_the_mixer_computes_what_transformers_computes(registry: Registry, hf_model) -> None:
    cost = bind(registry.models["jamba_small"], registry.profile("jamba"), families=registry.families)
    ours = Mamba(cost.kind_config("mamba_dense"))
    theirs = hf_model.model.layers[0].mamba
    names = {"dt_layernorm": "dt_norm", "b_layernorm": "b_norm", "c_layernorm": "c_norm"}
    state = {".".join([names.get(k.split(".")[0], k.split(".")[0]), *k.split(".")[1:]]): v
             for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)
    x = torch.randn(BATCH, SEQ, 64)
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)


def test_a_scaled_jamba_has_transformers_parameters_and_trains(registry: Registry, hf_model) -> None:
    built = _built(registry)
    count = sum(p.numel() for p in built.parameters())
    assert count == sum(p.numel() for p in hf_model.parameters()) == 606_540
    assert count == parameters(bind(registry.models["jamba_small"], registry.profile("jamba"),
                                    families=registry.families)).total
    logits = built(torch.randint(0, 128, (BATCH, SEQ)))
    logits.float().square().mean().backward()
    assert all(p.grad is not None for name, p in built.named_parameters() if ".experts" not in name)


def _estimated_matmuls(registry: Registry) -> float:
    cost = bind(registry.models["jamba_small"], registry.profile("jamba"), families=registry.families)
    terms = forward_flops_by_term(cost, batch=BATCH, seq_len=SEQ)
    columns = [*cost.layer_kinds(), "output"]
    return sum(terms[column].get(term, 0.0) for column in columns for term in MATMUL_TERMS)


def _measured(model: torch.nn.Module) -> int:
    ids = torch.randint(0, 128, (BATCH, SEQ))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(ids)
    return int(counter.get_total_flops())


def test_the_built_models_matmul_flops_are_the_estimate(registry: Registry) -> None:
    assert _measured(_built(registry)) == _estimated_matmuls(registry) == 28_737_536


def test_transformers_matmul_flops_are_the_estimate_plus_its_padded_convolution(registry: Registry,
                                                                                  hf_model) -> None:
    # JambaMambaMixer's conv1d pads ssm_conv − 1 on both sides and drops the last outputs:
    # per Mamba layer and sequence, (K − 1) extra outputs of d_inner channels, 2·K FLOPs each.
    mamba_layers, d_inner, kernel = 7, 128, 4
    padding = mamba_layers * BATCH * (kernel - 1) * d_inner * 2 * kernel
    assert _measured(hf_model) == _estimated_matmuls(registry) + padding == 28_780_544


# --------------------------------------------------------------------------
# Mamba-2 (Bamba)
# --------------------------------------------------------------------------

BAMBA = """
model bamba_small : bamba {
  hidden 64
  layers 4
  heads 4
  kv_heads 2
  vocab 128
  ffn_width 96
  ssm { ssm_state 8  ssm_conv 4  ssm_expand 2  ssm_heads 8  ssm_groups 2  ssm_chunk 8  ssm_conv_bias }
  stack [linear_attention, full_attention, linear_attention * 2]
}
"""
HF_BAMBA = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                intermediate_size=96, attn_layer_indices=[1], mamba_n_heads=8, mamba_n_groups=2, mamba_d_state=8,
                mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=8, attn_implementation="eager")


@pytest.fixture(scope="module")
def bamba() -> Registry:
    return compile_sources([Source("bamba_small.hpf", BAMBA)])


@pytest.fixture(scope="module")
def hf_bamba():
    torch.manual_seed(0)
    return transformers.BambaForCausalLM(transformers.BambaConfig(**HF_BAMBA)).eval()


def _bamba_cost(bamba: Registry):
    return bind(bamba.models["bamba_small"], bamba.profile("bamba"), families=bamba.families)


def test_the_mamba2_mixer_computes_what_transformers_computes(bamba: Registry, hf_bamba) -> None:
    ours = Mamba2(_bamba_cost(bamba).kind_config("linear_attention"))
    theirs = hf_bamba.model.layers[0].mamba
    ours.load_state_dict(theirs.state_dict())
    ours.norm.eps = theirs.norm.variance_epsilon  # hpdsl's norms use norm_eps 1e-6; Bamba's config 1e-5
    x = torch.randn(BATCH, SEQ, 64)
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)


def test_a_scaled_bamba_has_transformers_parameters_and_trains(bamba: Registry, hf_bamba) -> None:
    torch.manual_seed(0)
    built = build_model(bamba.models["bamba_small"], registry=bamba, device="cpu",
                        selectors={"attention": {"backend": "eager"}})
    count = sum(p.numel() for p in built.parameters())
    assert count == sum(p.numel() for p in hf_bamba.parameters()) == parameters(_bamba_cost(bamba)).total == 187_240
    built(torch.randint(0, 128, (BATCH, SEQ))).float().square().mean().backward()
    assert all(p.grad is not None for p in built.parameters())


def test_mamba2_matmul_flops_are_the_estimate(bamba: Registry, hf_bamba) -> None:
    cost = _bamba_cost(bamba)
    terms = forward_flops_by_term(cost, batch=BATCH, seq_len=SEQ)
    estimate = sum(terms[c].get(t, 0.0) for c in [*cost.layer_kinds(), "output"] for t in MATMUL_TERMS)
    torch.manual_seed(0)
    built = build_model(bamba.models["bamba_small"], registry=bamba, device="cpu",
                        selectors={"attention": {"backend": "eager"}})
    assert _measured(built) == estimate == 12_181_504
    # transformers' reference scan carries the chunk states with one (c+1)×(c+1) matmul per head
    # (2·(c+1)²·H·P·N per sequence, c = s / L chunks) where the estimate and the reference module
    # carry them elementwise, and its conv1d computes K − 1 dropped outputs (docs/validation.md).
    layers, heads, head_dim, state, chunks, conv_dim, kernel = 3, 8, 16, 8, SEQ // 8, 128 + 2 * 2 * 8, 4
    carried = layers * BATCH * 2 * (chunks + 1) ** 2 * heads * head_dim * state
    padding = layers * BATCH * (kernel - 1) * conv_dim * 2 * kernel
    assert _measured(hf_bamba) == estimate + carried + padding == 12_315_136
