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
from hpdsl.cost.flops import MATMUL_TERMS, forward_flops_by_term  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.modules import Mamba  # noqa: E402

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
