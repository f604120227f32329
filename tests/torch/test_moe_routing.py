"""hpdsl's MoE routing (hpdsl/torch/modules/moe.py, Routing) picks and weighs what transformers' routers do.

Each case is one of transformers' router modules, built by its config class at small dims
(the class's other values its defaults: no published file is needed to hold a router to its
reference, the logits tests do that: tests/torch/test_hf_logits.py) with random weights; hpdsl's
Routing of the same semantics, fed the router's logits (and its score correction), chooses the
same experts per token with the same weights.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.torch.modules.moe import Routing  # noqa: E402

HIDDEN, EXPERTS, TOKENS = 16, 8, 64


def _router(module: str, cls: str, config: Any) -> Any:
    module_ = __import__(f"transformers.models.{module}.modeling_{module}", fromlist=[cls])
    torch.manual_seed(0)
    router = getattr(module_, cls)(config)
    with torch.no_grad():
        for tensor in [*router.parameters(), *router.buffers()]:
            tensor.copy_(torch.randn_like(tensor))
    return router


CASES = {
    # Mixtral: softmax, top-k, always renormalised.
    "mixtral": (lambda: _router("mixtral", "MixtralTopKRouter", transformers.MixtralConfig(
        hidden_size=HIDDEN, num_local_experts=EXPERTS, num_experts_per_tok=2)), Routing(2)),
    # Qwen3-MoE at Qwen3MoeConfig's default norm_topk_prob (false): the top-k softmax weights as they are.
    "qwen3_moe": (lambda: _router("qwen3_moe", "Qwen3MoeTopKRouter", transformers.Qwen3MoeConfig(
        hidden_size=HIDDEN, num_experts=EXPERTS, num_experts_per_tok=2)), Routing(2, renormalise=False)),
    # gpt-oss: a softmax over the top-k logits, which is the renormalised top-k of the softmax.
    "gpt_oss": (lambda: _router("gpt_oss", "GptOssTopKRouter", transformers.GptOssConfig(
        hidden_size=HIDDEN, num_local_experts=EXPERTS, num_experts_per_tok=4)), Routing(4)),
    # DeepSeek-V3: sigmoid scores, correction for the choice, 4 groups of 2, the best 2 groups, scale 2.5.
    "deepseek_v3": (lambda: _router("deepseek_v3", "DeepseekV3TopkRouter", transformers.DeepseekV3Config(
        hidden_size=HIDDEN, n_routed_experts=EXPERTS, num_experts_per_tok=3, n_group=4, topk_group=2,
        routed_scaling_factor=2.5, norm_topk_prob=True)),
        Routing(3, sigmoid=True, groups=4, group_top=2, scale=2.5)),
}


def _sorted(weights: Any, indices: Any) -> tuple[Any, Any]:
    order = indices.argsort(-1)
    return weights.gather(1, order), indices.gather(1, order)


@pytest.mark.parametrize("case", list(CASES))
def test_the_same_experts_with_the_same_weights(case: str) -> None:
    make, routing = CASES[case]
    router = make()
    x = torch.randn(TOKENS, HIDDEN, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits, expected, chosen = router(x)
        correction = getattr(router, "e_score_correction_bias", None)
        weights, indices = routing.route(logits, correction)
    want_w, want_i = _sorted(expected.float(), chosen)
    got_w, got_i = _sorted(weights, indices)
    assert torch.equal(got_i, want_i)
    torch.testing.assert_close(got_w, want_w, atol=1e-5, rtol=1e-5)


def test_group_limited_choice_keeps_a_tokens_experts_in_its_best_groups() -> None:
    """With one group allowed, every token's experts lie in one group, whatever the ungrouped top-k is."""
    logits = torch.randn(TOKENS, EXPERTS, generator=torch.Generator().manual_seed(2))
    _, indices = Routing(2, sigmoid=True, groups=4, group_top=1).route(logits)
    assert bool(((indices // 2)[:, 0] == (indices // 2)[:, 1]).all())  # 2 experts a group: index // 2 is its group
    _, free = Routing(2, sigmoid=True).route(logits)
    assert not bool(((free // 2)[:, 0] == (free // 2)[:, 1]).all())


def test_the_correction_changes_the_choice_not_the_weights() -> None:
    logits = torch.randn(TOKENS, EXPERTS, generator=torch.Generator().manual_seed(3))
    routing = Routing(2, sigmoid=True, renormalise=False)
    correction = torch.zeros(EXPERTS)
    correction[0] = 10.0  # expert 0 is chosen for every token
    weights, indices = routing.route(logits, correction)
    assert bool((indices == 0).any(-1).all())
    torch.testing.assert_close(weights, logits.sigmoid().gather(1, indices))
