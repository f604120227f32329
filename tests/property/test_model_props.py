"""Spec coherence: a model that compiles clean is a model the cost side can price.

See docs/reference.md#models-are-coherent.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hpdsl.api import check_sources
from hpdsl.cost import bind, parameters
from hpdsl.diagnostics import Source
from hpdsl.ir.nodes import block_stated

dims = st.integers(-2, 12)


@st.composite
def model_texts(draw: st.DrawFn) -> str:
    profile = draw(st.sampled_from(["qwen3_5", "deepseek", "llama2"]))
    fields = {name: draw(dims) for name in ("hidden", "layers", "heads", "vocab")}
    lines = [f"{name} {value}" for name, value in fields.items()]
    if draw(st.booleans()):
        lines.append(f"kv_heads {draw(dims)}")
    if draw(st.booleans()):
        lines.append(f"ffn_width {draw(dims)}")
    if draw(st.booleans()):
        moe = {"experts": draw(dims), "top_k": draw(dims), "width": draw(dims)}
        if draw(st.booleans()):
            moe["shared"] = draw(dims)
        kept = draw(st.sets(st.sampled_from(sorted(moe)), min_size=1))
        lines.append("moe { " + "  ".join(f"{k} {moe[k]}" for k in sorted(kept)) + " }")
    if draw(st.booleans()):
        names = ["key_heads", "key_head_dim", "value_heads", "value_head_dim", "conv"]
        kept = draw(st.sets(st.sampled_from(names), min_size=1))
        lines.append("linear { " + "  ".join(f"{k} {draw(dims)}" for k in sorted(kept)) + " }")
    if profile == "qwen3_5" and draw(st.booleans()):
        lines.append(f"stack [linear_attention * {draw(dims)}, full_attention] * {draw(dims)}")
    if draw(st.booleans()):
        lines.append(f"mtp {draw(st.integers(0, 2))}")
    return f"model m : {profile} {{\n  " + "\n  ".join(lines) + "\n}\n"


@given(model_texts())
def test_a_clean_model_is_coherent_and_priceable(text: str) -> None:
    result = check_sources([Source("m.hpf", text)], stdlib=True)
    if result.registry is None:
        assert any(d.is_error and d.span.file == "m.hpf" for d in result.diagnostics)
        return
    model = result.registry.models["m"]
    profile = result.registry.profiles[model.profile]
    assert min(model.hidden, model.layers, model.heads, model.vocab) > 0
    assert model.heads % (model.kv_heads or model.heads) == 0
    body = [g for g in model.groups if not g.mtp]
    assert sum(g.count for g in body) == model.layers
    assert sum(g.count for g in model.groups if g.mtp) == model.mtp
    kinds = [profile.kinds[g.kind] for g in model.groups]
    if any(k.attention == "linear" for k in kinds):
        assert block_stated(model, "linear")
    if any(k.ffn == "moe" for k in kinds) or block_stated(model, "moe"):
        assert block_stated(model, "moe") and model.expert_width > 0 and model.top_k <= model.experts
    report = parameters(bind(model, profile))
    assert report.total > 0 and 0 < report.active <= report.total


def test_more_heads_than_hidden_dims_is_an_error_at_the_model() -> None:
    """head_dim = hidden // heads = 0 (hypothesis found it): located in the model, not only at the profile's slot."""
    result = check_sources([Source("m.hpf", "model m : llama2 {\n  hidden 1\n  layers 1\n  heads 2\n  vocab 1\n"
                                            "  ffn_width 1\n}\n")], stdlib=True)
    assert any(d.is_error and d.span.file == "m.hpf" and "hidden 1 // heads 2 = 0" in d.message
               for d in result.diagnostics)
