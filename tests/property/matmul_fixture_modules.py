"""A module that creates a drawn layout's parameters and runs each weight matmul on its tokens.

For tests/property/test_layout_matmul_props.py.

The spec is plain data passed as the variant's `spec` argument: per parameter,
its name, its dims, its condition (as tests/property/layout_fixture_modules.py)
and what the module does with it, decided here in Python apart from hpdsl's
layout code:

- "matmul" (a Linear's [out, in], at `NAME.weight`): every token times it;
- "conv" (a depthwise convolution's [channels, 1, K], at `NAME.weight`): K taps per channel and token;
- "bank" (per-expert matrices [experts, a, b], at `NAME`): each routed token times its experts' matrices;
- "vector" and "state" (a 1-D or 2-D parameter at `NAME`): held, never multiplied.

The inputs are zeros of the needed widths: FlopCounterMode counts a product by
its shapes, which is all the property compares.
"""

from __future__ import annotations

from typing import Any

import torch
from layout_fixture_modules import Condition, Dim, dim_value, holds
from torch import nn

Use = str  # matmul | conv | bank | vector | state
MatmulEntry = tuple[str, tuple[Dim, ...], Condition, Use]


def parameter_path(name: str, use: Use) -> str:
    """Return the parameter's path in the module: a submodule's `weight` for a matmul or a convolution."""
    return f"{name}.weight" if use in ("matmul", "conv") else name


class _Holder(nn.Module):
    """A submodule holding one `weight`, as a Linear or a convolution does."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(*shape))


class DrawnMatmuls(nn.Module):
    """Creates each spec entry whose condition holds; its forward runs the matmul and convolution entries."""

    def __init__(self, config: Any, *, spec: tuple[MatmulEntry, ...] = (), **_: Any) -> None:
        super().__init__()
        self.uses: list[tuple[str, Use]] = []
        for name, dims, condition, use in spec:
            if not holds(condition, config):
                continue
            shape = tuple(dim_value(d, config) for d in dims)
            if use in ("matmul", "conv"):
                self.add_module(name, _Holder(shape))
            else:
                self.register_parameter(name, nn.Parameter(torch.zeros(*shape)))
            self.uses.append((name, use))

    def _weight(self, name: str, use: Use) -> torch.Tensor:
        return self.get_parameter(parameter_path(name, use))

    def _run(self, tokens: int, indices: torch.Tensor | None, like: torch.Tensor) -> None:
        """Run every matmul entry on `tokens` tokens (a bank on each expert's routed tokens)."""
        for name, use in self.uses:
            weight = self._weight(name, use)
            if use == "matmul":
                _ = like.new_zeros(tokens, weight.shape[1]) @ weight.t()
            elif use == "conv":
                channels, _, taps = weight.shape
                stream = like.new_zeros(1, channels, tokens + taps - 1)
                _ = nn.functional.conv1d(stream, weight, groups=channels)
            elif use == "bank" and indices is not None:
                for expert in range(weight.shape[0]):
                    rows = int((indices == expert).sum())
                    matrix = weight[expert].reshape(-1, weight.shape[-1])
                    _ = like.new_zeros(rows, matrix.shape[0]) @ matrix

    def forward(self, x: torch.Tensor, *args: Any, **_: Any) -> torch.Tensor:
        """Run the matmuls on x's tokens and return x (as an experts module: zeros of the tokens' shape)."""
        indices = args[0] if args and isinstance(args[0], torch.Tensor) else None
        self._run(x.numel() // x.shape[-1], indices, x)
        return torch.zeros_like(x) if indices is not None else x
