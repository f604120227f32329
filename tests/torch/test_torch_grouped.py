"""The routed experts on one grouped GEMM (hpdsl/torch/modules/grouped.py) against the expert-by-expert loop."""

from __future__ import annotations

import pytest
import torch

from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.modules import GroupedExperts
from hpdsl.torch.modules.grouped import expert_of_rows, grouped_applies, grouped_mm, offsets_of


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_mm_and_its_gradients_equal_one_matmul_per_expert(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    counts = torch.tensor([5, 0, 9, 2])
    rows = torch.randn(16, 32, dtype=dtype, requires_grad=True)
    weight = torch.randn(4, 32, 16, dtype=dtype, requires_grad=True)
    assert grouped_applies(rows, weight)
    out = grouped_mm(rows, weight, offsets_of(counts))
    out.sum().backward()  # an expanded gradient: made contiguous before the grouped backward
    rows2, weight2 = rows.detach().clone().requires_grad_(), weight.detach().clone().requires_grad_()
    loop = torch.cat([block @ weight2[e] for e, block in enumerate(rows2.split(counts.tolist()))])
    loop.sum().backward()
    torch.testing.assert_close(out, loop)
    torch.testing.assert_close(rows.grad, rows2.grad)
    torch.testing.assert_close(weight.grad, weight2.grad)
    assert expert_of_rows(counts, 16).tolist() == [0] * 5 + [2] * 9 + [3] * 2


def test_operands_the_grouped_gemm_cannot_take_run_expert_by_expert() -> None:
    rows = torch.randn(4, 6)
    assert not grouped_applies(rows, torch.randn(2, 6, 8))  # 6 fp32 values: a 24-byte stride
    assert not grouped_applies(rows.double(), torch.randn(2, 6, 8).double())
    assert not grouped_applies(torch.randn(0, 8), torch.randn(2, 8, 8))


@pytest.mark.parametrize("hidden", [16, 6])
def test_grouped_experts_train_as_the_loop_does(hidden: int) -> None:
    torch.manual_seed(3)
    cfg = ModuleConfig(hidden=hidden, ffn_width=8, experts=4, top_k=2, mlp_bias=True)
    experts = GroupedExperts(cfg)
    torch.nn.init.normal_(experts.up_bias)
    x = torch.randn(9, hidden, requires_grad=True)
    indices, weights = torch.randint(0, 4, (9, 2)), torch.rand(9, 2)
    experts(x, indices, weights).square().sum().backward()
    grads = {name: p.grad.clone() for name, p in experts.named_parameters()}
    experts.zero_grad()
    x2 = x.detach().clone().requires_grad_()
    loop = torch.stack([sum(weights[t, j] * experts.expert(int(indices[t, j]), x2[t:t + 1])[0] for j in range(2))
                        for t in range(9)])
    loop.square().sum().backward()
    for name, p in experts.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-5)
