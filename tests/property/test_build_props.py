"""A spec that compiles is a spec that builds, with exactly the parameters the estimator prices.

Models are drawn over every standard profile (profiles/*.hpf), coherent most of
the time (dims that divide, the blocks each profile's kinds need, stacks that
fit), deliberately incoherent the rest (a wrong `mlp` form, an odd norm count,
uneven linear heads, QK-norm under MLA, a stack an encoder-decoder cannot hold,
...). Each is compiled as .hpf text; compiling succeeds exactly when
`build_model` does on the meta device, and then the built parameters equal
`parameters(bind(...))`. A spec failing only the layer checks
(hpdsl/bound/shape.py) is lowered anyway and built, which must then fail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from hpdsl.api import check, check_sources, lower
from hpdsl.cost import bind, parameters
from hpdsl.diagnostics import Diagnostic, Source
from hpdsl.errors import BuildError
from hpdsl.loader import load_sources
from hpdsl.registry import Registry

if TYPE_CHECKING:
    from torch import nn

pytest.importorskip("torch")
build_model = pytest.importorskip("hpdsl.torch").build_model

PROFILES = ("default", "llama2", "mixtral", "qwen", "qwen3_5", "deepseek", "t5", "cm", "pangualpha", "vision")
"""Every standard profile (profiles/*.hpf)."""

FF_MATRICES = {"t5": 2, "pangualpha": 2, "vision": 2}
"""The ffMM of each profile's kinds where it is not 3."""

LAYER_CODES = frozenset({
    "layer-attentions", "cross-attention-outside-decoder", "ffn-matrices", "mlp-form-mismatch",
    "norm-count-mismatch", "value-heads-not-divisible", "mla-qk-norm", "encoder-decoder-stack",
})
"""The codes only the layer check reports: a spec failing on these alone checked clean otherwise."""

INCOHERENCES = ("mlp", "norms", "value_heads", "mla_qk_norm", "t5_mtp", "t5_decoders", "kv_heads", "no_block")


def compile_text(text: str) -> tuple[Registry | None, tuple[Diagnostic, ...]]:
    """Compile one model text with the standard library: this test's one use of the compile API."""
    result = check_sources([Source("m.hpf", text)])
    return result.registry, result.diagnostics


def lower_despite_layer_errors(text: str) -> Registry | None:
    """Lower a spec whose only errors are the layer check's (its AST checked clean); None otherwise."""
    loaded = load_sources([Source("m.hpf", text)])
    scope, diagnostics = check(loaded.files)
    if any(d.is_error and d.code not in LAYER_CODES for d in diagnostics):
        return None
    return Registry(lower(scope, loaded.sources))


@attrs.define
class Spec:
    """One drawn model: its profile, its statements, and the incoherence drawn into it (None: coherent)."""

    profile: str
    lines: list[str] = attrs.field(factory=list)
    incoherent: str | None = None

    def text(self) -> str:
        """Return the model as .hpf text."""
        return f"model m : {self.profile} {{\n  " + "\n  ".join(self.lines) + "\n}\n"


def _flags(draw: st.DrawFn, spec: Spec, *, mla: bool) -> None:
    for flag in ("tie_embeddings", "qkv_bias", "o_bias", "mlp_bias", "norm_bias", "output_gate", "qk_norm"):
        value = draw(st.sampled_from((None, True, False)))
        if flag == "qk_norm" and mla and spec.incoherent != "mla_qk_norm":
            value = draw(st.sampled_from((None, False)))
        if flag == "qk_norm" and spec.incoherent == "mla_qk_norm":
            value = True
        if value is not None:
            spec.lines.append(flag if value else f"{flag} false")
    spec.lines.append(f"norm {draw(st.sampled_from(('rmsnorm', 'layernorm')))}")
    spec.lines.append(f"activation {draw(st.sampled_from(('silu', 'gelu', 'gelu_tanh', 'relu', 'relu2')))}")


def _attention(draw: st.DrawFn, spec: Spec) -> None:
    """State hidden, heads, kv_heads and head_dim."""
    heads = draw(st.sampled_from((1, 2, 4)))
    head_dim = draw(st.sampled_from((None, 4, 8)))
    hidden = heads * draw(st.sampled_from((2, 4, 8))) if head_dim is None else draw(st.sampled_from((8, 12, 16)))
    spec.lines.append(f"hidden {hidden}  heads {heads}  vocab {draw(st.integers(8, 40))}")
    if head_dim is not None:
        spec.lines.append(f"head_dim {head_dim}")
    if spec.incoherent == "kv_heads":
        spec.lines.append(f"kv_heads {heads + 1}" if heads > 1 else "kv_heads 2")
    elif draw(st.booleans()):
        spec.lines.append(f"kv_heads {draw(st.sampled_from([d for d in (1, 2, 4) if heads % d == 0]))}")


def _moe(draw: st.DrawFn) -> str:
    experts = draw(st.integers(1, 5))
    parts = [f"experts {experts}", f"top_k {draw(st.integers(1, experts))}", f"expert_width {draw(st.integers(1, 24))}"]
    shared = draw(st.integers(0, 2))
    if shared:
        parts.append(f"shared_experts {shared}")
        if draw(st.booleans()):
            parts.append(f"shared_width {draw(st.integers(1, 16))}")
        if draw(st.booleans()):
            parts.append("shared_gate")
    if draw(st.booleans()):
        parts.append("router_bias")
    return "moe { " + "  ".join(parts) + " }"


def _linear(draw: st.DrawFn, uneven: bool) -> str:
    key_heads = draw(st.sampled_from((1, 2))) + (1 if uneven else 0)
    value_heads = key_heads * draw(st.integers(1, 3)) + (1 if uneven else 0)
    dims = st.sampled_from((2, 3, 4, 8))
    return (f"linear {{ key_heads {key_heads}  key_head_dim {draw(dims)}  value_heads {value_heads}  "
            f"value_head_dim {draw(dims)}  conv {draw(st.integers(1, 4))} }}")


def _mla(draw: st.DrawFn) -> str:
    return (f"mla {{ q_lora_rank {draw(st.sampled_from((0, 8)))}  kv_lora_rank {draw(st.integers(1, 12))}  "
            f"rope_dim {draw(st.sampled_from((2, 4)))}  nope_dim {draw(st.sampled_from((2, 4, 8)))}  "
            f"v_head_dim {draw(st.sampled_from((2, 4, 8)))} }}")


def _layers(draw: st.DrawFn, spec: Spec) -> None:
    """State the layers, the stack and the blocks the profile's kinds need."""
    profile = spec.profile
    layers = 2 * draw(st.integers(1, 2)) if profile == "t5" else draw(st.integers(1, 4))
    spec.lines.append(f"layers {layers}  ffn_width {draw(st.integers(1, 32))}")
    if profile == "t5":
        if spec.incoherent == "t5_mtp":
            spec.lines.append("mtp 1")
        if spec.incoherent == "t5_decoders":
            spec.lines.append(f"stack [decoder * {layers}]")
    elif profile == "qwen3_5":
        kinds = draw(st.lists(st.sampled_from(("full_attention", "linear_attention")),
                              min_size=layers, max_size=layers))
        if spec.incoherent in ("value_heads", "no_block"):
            kinds[0] = "linear_attention"
        spec.lines.append("stack [" + ", ".join(kinds) + "]")
        if "linear_attention" in kinds and spec.incoherent != "no_block":
            spec.lines.append(_linear(draw, spec.incoherent == "value_heads"))
    elif profile in ("deepseek", "cm"):
        dense = 0 if spec.incoherent == "no_block" else draw(st.integers(0, layers))  # no_block: MoE layers
        spec.lines.append(f"first_k_dense {dense}  mtp {draw(st.integers(0, 1))}")
        if spec.incoherent != "no_block":
            spec.lines.append(_moe(draw))
    else:
        spec.lines.append(f"mtp {draw(st.integers(0, 1))}")
    if profile not in ("deepseek", "cm", "qwen3_5") and draw(st.integers(0, 3)) == 0:
        spec.lines.append(_moe(draw))


def _feed_forward(draw: st.DrawFn, spec: Spec) -> None:
    """State the mlp form and the norms a layer has, agreeing with the profile unless drawn otherwise."""
    matrices = FF_MATRICES.get(spec.profile, 3)
    form = {3: "gated", 2: "plain"}[matrices]
    if spec.incoherent == "mlp":
        spec.lines.append(f"mlp {'plain' if form == 'gated' else 'gated'}")
    elif draw(st.booleans()):
        spec.lines.append(f"mlp {form}")
    if spec.incoherent == "norms":
        spec.lines.append(f"layer_norms {draw(st.sampled_from((0, 1, 3, 4)))}")
    elif spec.profile == "pangualpha":
        spec.lines.append("layer_norms 2")  # its kind counts normOp 4, for the activations it saves
    elif spec.profile != "t5" and draw(st.booleans()):
        spec.lines.append("layer_norms 2")
    if spec.profile == "t5" or draw(st.integers(0, 4)) == 0:
        spec.lines.append(f"position_buckets {draw(st.integers(2, 8))}")


def _incoherence(draw: st.DrawFn, profile: str) -> str | None:
    """Draw None (coherent) three times in four, else an incoherence the profile can have."""
    if draw(st.integers(0, 3)):
        return None
    only = {"value_heads": ("qwen3_5",), "mla_qk_norm": ("deepseek", "cm"), "t5_mtp": ("t5",),
            "t5_decoders": ("t5",), "no_block": ("deepseek", "cm", "qwen3_5")}
    return draw(st.sampled_from([i for i in INCOHERENCES if profile in only.get(i, (profile,))]))


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    """Draw a model over a standard profile, coherent three times in four."""
    profile = draw(st.sampled_from(PROFILES))
    spec = Spec(profile, incoherent=_incoherence(draw, profile))
    _attention(draw, spec)
    _layers(draw, spec)
    mla = profile in ("deepseek", "cm") and (spec.incoherent == "mla_qk_norm" or draw(st.booleans()))
    if mla:
        spec.lines.append(_mla(draw))
    _feed_forward(draw, spec)
    _flags(draw, spec, mla=mla)
    return spec


def parameter_count(model: nn.Module, *, mtp: bool = False) -> int:
    """Return the parameters outside (or, with mtp, inside) the MTP layers."""
    return sum(p.numel() for name, p in model.named_parameters() if name.startswith("mtp.") == mtp)


def _builds(registry: Registry) -> nn.Module | None:
    try:
        return build_model("m", registry=registry, device="meta", include_mtp=True)
    except BuildError:
        return None


BASE = "hidden 16  heads 4  vocab 32  layers 2  ffn_width 24"


@given(specs())
@example(Spec("t5", [BASE, "mtp 1"], "t5_mtp"))
@example(Spec("t5", [BASE, "stack [decoder * 2]"], "t5_decoders"))
@example(Spec("pangualpha", [BASE], "norms"))
@example(Spec("llama2", [BASE, "mlp plain"], "mlp"))
@example(Spec("qwen3_5", [BASE, "stack [linear_attention, full_attention]",
                          "linear { key_heads 2  key_head_dim 4  value_heads 3  value_head_dim 4  conv 2 }"],
              "value_heads"))
@example(Spec("deepseek", [BASE, "qk_norm", "moe { experts 4  top_k 2  expert_width 8 }",
                           "mla { kv_lora_rank 8  rope_dim 2  nope_dim 4  v_head_dim 4 }"], "mla_qk_norm"))
def test_a_spec_compiles_exactly_when_it_builds_with_the_priced_parameters(spec: Spec) -> None:
    text = spec.text()
    event(f"{spec.profile}: {spec.incoherent or 'coherent'}")
    registry, diagnostics = compile_text(text)
    errors = [f"{d.code}: {d.message}" for d in diagnostics if d.is_error]
    assert (registry is not None) == (spec.incoherent is None), (spec.incoherent, errors, text)
    if registry is None:
        registry = lower_despite_layer_errors(text)
        event("refused by the checker only" if registry is None else "refused by the checker and the backend")
        assert registry is None or _builds(registry) is None, (errors, text)
        return
    built = _builds(registry)
    assert built is not None, text
    model = registry.model("m")
    report = parameters(bind(model, registry.profile(model.profile)))
    assert (parameter_count(built), parameter_count(built, mtp=True)) == (report.total, report.mtp), text


@pytest.mark.parametrize("profile", PROFILES)
def test_every_standard_profile_builds_a_coherent_model(profile: str) -> None:
    text = Spec(profile, [
        BASE, "kv_heads 2",
        *(["layer_norms 2"] if profile == "pangualpha" else []),
        *(["linear { key_heads 2  key_head_dim 4  value_heads 4  value_head_dim 4  conv 2 }",
           "stack [linear_attention, full_attention]"] if profile == "qwen3_5" else []),
        *(["moe { experts 4  top_k 2  expert_width 8 }"] if profile in ("deepseek", "cm") else []),
    ]).text()
    registry, diagnostics = compile_text(text)
    assert registry is not None, [d.message for d in diagnostics]
    built = _builds(registry)
    assert built is not None
    model = registry.model("m")
    assert parameter_count(built) == parameters(bind(model, registry.profile(profile))).total
