"""Reference modules for families/hyper_connection.hpf: DeepSeek-V4's manifold-constrained hyper-connections.

The residual stream is hc_mult streams [b, s, hc_mult, h]. `HyperConnection` (each
layer's mixer_hc and ffn_hc, transformers' DeepseekV4HyperConnection) makes, from the
streams flattened and RMS-normalised without a scale, the block's input (the `pre`
mix), the weights spreading its output back over the streams (`post`) and the
doubly stochastic stream mix (`comb`, Sinkhorn-Knopp); hpdsl/torch/layers.py
`DecoderLayer` applies them. `HyperHead` (the model's hc_head, DeepseekV4HyperHead)
collapses the streams into one before the final norm.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hpdsl.errors import BuildError
from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.mesh import ContextLike
from hpdsl.torch.modules.compressed import unweighted_rms


def _streams(config: ModuleConfig) -> int:
    streams = int(config.hc_mult or 0)
    if streams < 1:
        raise BuildError(f"a hyper-connection needs hc_mult ≥ 1 residual streams, found {config.hc_mult}")
    return streams


class HyperConnection(nn.Module):
    """One block's hyper-connection (the `sinkhorn` variant): fn, base and scale make pre, post and comb."""

    def __init__(self, config: ModuleConfig, *, context: ContextLike = None, module_fqn: str = "") -> None:
        super().__init__()
        n = self.streams = _streams(config)
        self.iterations, self.eps = int(config.hc_sinkhorn_iters), float(config.hc_eps)
        self.norm_eps = float(config.norm_eps)
        self.fn = nn.Parameter(torch.empty((2 + n) * n, n * config.hidden))
        self.base = nn.Parameter(torch.zeros((2 + n) * n))
        self.scale = nn.Parameter(torch.ones(3))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise as transformers does: fn normal (0.02), base zeros, scale ones."""
        with torch.no_grad():
            nn.init.normal_(self.fn, std=0.02)
            self.base.zero_()
            self.scale.fill_(1.0)

    def forward(self, streams: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Return (post [b, s, n], comb [b, s, n, n], the block's input [b, s, h]) of `streams` [b, s, n, h]."""
        n = self.streams
        flat = unweighted_rms(streams.flatten(2).float(), self.norm_eps)
        mixes = nn.functional.linear(flat, self.fn.float())
        pre_w, post_w, comb_w = mixes.split([n, n, n * n], dim=-1)
        pre_b, post_b, comb_b = self.base.float().split([n, n, n * n])
        pre_s, post_s, comb_s = self.scale.float().unbind(0)
        pre = torch.sigmoid(pre_w * pre_s + pre_b) + self.eps
        post = 2 * torch.sigmoid(post_w * post_s + post_b)
        comb = torch.softmax(comb_w.unflatten(-1, (n, n)) * comb_s + comb_b.view(n, n), dim=-1) + self.eps
        comb = comb / (comb.sum(dim=-2, keepdim=True) + self.eps)
        for _ in range(self.iterations - 1):  # Sinkhorn-Knopp: rows, then columns, sum to one
            comb = comb / (comb.sum(dim=-1, keepdim=True) + self.eps)
            comb = comb / (comb.sum(dim=-2, keepdim=True) + self.eps)
        collapsed = (pre.unsqueeze(-1) * streams).sum(dim=2).to(streams.dtype)
        return post, comb, collapsed

    def merge(self, streams: Tensor, out: Tensor, post: Tensor, comb: Tensor) -> Tensor:
        """Return the new streams: the block's output `out` [b, s, h] spread by post, plus the streams mixed by comb."""
        dtype = streams.dtype
        return post.to(dtype).unsqueeze(-1) * out.unsqueeze(-2) + torch.matmul(comb.to(dtype).transpose(-1, -2),
                                                                                streams)


class HyperHead(nn.Module):
    """The model's last collapse of the streams (the `sigmoid` variant): a sigmoid-weighted sum."""

    def __init__(self, config: ModuleConfig, *, context: ContextLike = None, module_fqn: str = "") -> None:
        super().__init__()
        n = self.streams = _streams(config)
        self.eps, self.norm_eps = float(config.hc_eps), float(config.norm_eps)
        self.hc_fn = nn.Parameter(torch.empty(n, n * config.hidden))
        self.hc_base = nn.Parameter(torch.zeros(n))
        self.hc_scale = nn.Parameter(torch.ones(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise as transformers does: hc_fn normal (0.02), hc_base zeros, hc_scale one."""
        with torch.no_grad():
            nn.init.normal_(self.hc_fn, std=0.02)
            self.hc_base.zero_()
            self.hc_scale.fill_(1.0)

    def forward(self, streams: Tensor) -> Tensor:
        """Return the one stream [b, s, h] of `streams` [b, s, n, h]."""
        flat = unweighted_rms(streams.flatten(2).float(), self.norm_eps)
        mixes = nn.functional.linear(flat, self.hc_fn.float())
        pre = torch.sigmoid(mixes * self.hc_scale.float() + self.hc_base.float()) + self.eps
        return (pre.unsqueeze(-1) * streams).sum(dim=2).to(streams.dtype)


__all__ = ["HyperConnection", "HyperHead"]
