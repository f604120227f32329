"""Reference Mamba (selective state-space, v1) mixer for the `mamba` family (families/mamba.hpf).

Parameter names and shapes follow Transformers' JambaMambaMixer: in_proj (hidden
→ 2·d_inner: x and the gate z), a depthwise causal conv1d of ssm_conv taps,
x_proj (d_inner → Δ rank + 2·N), dt_proj (Δ rank → d_inner, with bias), A_log
and D, out_proj (d_inner → hidden), and with ssm_norms Jamba's RMSNorms on Δ,
B and C. The scan runs token by token in float32 (the definition, as
Transformers' fallback without mamba_ssm kernels): each step updates the
d_inner × N state elementwise and reads it out with one (d_inner × N)·(N × 1)
matmul, which is what FlopCounterMode sees of it (docs/validation.md).

The convolution pads on the left only, so it computes exactly one output per
token; Transformers pads both sides and drops the last ssm_conv − 1 outputs,
which FlopCounterMode counts too (docs/validation.md states the difference).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.mesh import ContextLike
from hpdsl.torch.modules.common import RMSNorm, job_of, refuse_axis


class Mamba(nn.Module):
    """The Mamba (v1) selective state-space mixer with a sequential scan."""

    def __init__(self, config: ModuleConfig, *, layer_index: int = 0, context: ContextLike = None,
                 module_fqn: str = "") -> None:
        super().__init__()
        refuse_axis(job_of(context, module_fqn), "cp", type(self).__name__, module_fqn)
        h, state, rank = config.hidden, config.ssm_state, config.ssm_dt_rank
        inner = config.ssm_expand * h
        if min(inner, state, rank, config.ssm_conv) < 1:
            raise ValueError("a Mamba mixer needs positive ssm dims (ssm_state, ssm_conv, ssm_expand, ssm_dt_rank)")
        self.layer_index, self.inner, self.state, self.rank = layer_index, inner, state, rank
        self.in_proj = nn.Linear(h, 2 * inner, bias=config.ssm_proj_bias)
        self.conv1d = nn.Conv1d(inner, inner, config.ssm_conv, groups=inner, bias=config.ssm_conv_bias)
        self.x_proj = nn.Linear(inner, rank + 2 * state, bias=False)
        self.dt_proj = nn.Linear(rank, inner, bias=True)
        self.A_log = nn.Parameter(torch.empty(inner, state))
        self.D = nn.Parameter(torch.empty(inner))
        self.out_proj = nn.Linear(inner, h, bias=config.ssm_proj_bias)
        norms = config.ssm_norms
        self.dt_norm = RMSNorm(rank, config.norm_eps, bias=False) if norms else None
        self.b_norm = RMSNorm(state, config.norm_eps, bias=False) if norms else None
        self.c_norm = RMSNorm(state, config.norm_eps, bias=False) if norms else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise A to −(1..N) per channel (S4D-real) and the skip D to ones."""
        with torch.no_grad():
            steps = torch.arange(1, self.state + 1, dtype=torch.float32, device=self.A_log.device)
            self.A_log.copy_(steps.log().expand(self.inner, -1))
        nn.init.ones_(self.D)

    def forward(self, x: Tensor, *, positions: Tensor | None = None, bias: Tensor | None = None,
                memory: Tensor | None = None) -> Tensor:
        """Mix `x` [b, s, h] causally through the selective scan; return [b, s, h]."""
        hidden, gate = self.in_proj(x).chunk(2, dim=-1)
        kernel = self.conv1d.weight.shape[-1]
        hidden = F.silu(self.conv1d(F.pad(hidden.transpose(1, 2), (kernel - 1, 0))))  # [b, d, s]
        step, b, c = self.x_proj(hidden.transpose(1, 2)).split([self.rank, self.state, self.state], dim=-1)
        if self.dt_norm is not None and self.b_norm is not None and self.c_norm is not None:
            step, b, c = self.dt_norm(step), self.b_norm(b), self.c_norm(c)
        step = self.dt_proj.weight @ step.transpose(1, 2)  # [b, d, s]; the bias joins in float32 below
        out = selective_scan(hidden, step + self.dt_proj.bias.float()[:, None], self.A_log, b, c)
        out = out + hidden * self.D[None, :, None]
        out = out * F.silu(gate.transpose(1, 2))
        return self.out_proj(out.transpose(1, 2).to(x.dtype))


def selective_scan(x: Tensor, step: Tensor, a_log: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """Return y [b, d, s] of the scan h ← exp(Δ·A)·h + Δ·B·x, y = C·h, token by token in float32.

    `x` and the pre-softplus time step `step` are [b, d, s], `b` and `c` [b, s, N].
    """
    delta = F.softplus(step.float())
    a = -a_log.float().exp()
    decay = torch.exp(a[None, :, None, :] * delta[..., None])  # [b, d, s, N]
    inputs = delta[..., None] * b.float()[:, None] * x.float()[..., None]
    state = x.new_zeros(x.shape[0], x.shape[1], a.shape[-1], dtype=torch.float32)
    outputs = []
    for t in range(x.shape[-1]):
        state = decay[:, :, t] * state + inputs[:, :, t]
        outputs.append(torch.matmul(state, c[:, t, :, None].float())[..., 0])
    return torch.stack(outputs, dim=-1).to(x.dtype)


class Mamba2(nn.Module):
    """The Mamba-2 (state-space duality) mixer: heads, groups of shared B and C, a chunked scan."""

    def __init__(self, config: ModuleConfig, *, layer_index: int = 0, context: ContextLike = None,
                 module_fqn: str = "") -> None:
        super().__init__()
        refuse_axis(job_of(context, module_fqn), "cp", type(self).__name__, module_fqn)
        h, state, heads, groups = config.hidden, config.ssm_state, config.ssm_heads, config.ssm_groups
        # d_inner: the heads × their head dim where stated (Nemotron-3), else ssm_expand × hidden (fields/model.hpf).
        inner = heads * config.ssm_head_dim if config.ssm_head_dim else config.ssm_expand * h
        if min(inner, state, heads, groups, config.ssm_conv, config.ssm_chunk) < 1:
            raise ValueError("a Mamba-2 mixer needs positive ssm dims (ssm_state, ssm_conv, ssm_expand, "
                             "ssm_heads, ssm_groups, ssm_chunk)")
        if inner % heads or heads % groups or inner % groups:
            raise ValueError(f"ssm_heads {heads} must divide d_inner {inner}, and ssm_groups {groups} the heads")
        self.layer_index, self.inner, self.state, self.heads, self.groups = layer_index, inner, state, heads, groups
        self.chunk = config.ssm_chunk
        conv = inner + 2 * groups * state
        self.in_proj = nn.Linear(h, inner + conv + heads, bias=config.ssm_proj_bias)
        self.conv1d = nn.Conv1d(conv, conv, config.ssm_conv, groups=conv, bias=config.ssm_conv_bias)
        self.dt_bias = nn.Parameter(torch.empty(heads))
        self.A_log = nn.Parameter(torch.empty(heads))
        self.D = nn.Parameter(torch.empty(heads))
        self.norm = RMSNorm(inner, config.norm_eps, bias=False)  # its weight, over each group's share (forward)
        self.out_proj = nn.Linear(inner, h, bias=config.ssm_proj_bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise A to −(1..H), the skip D and the norm to ones, the time-step bias to zeros."""
        with torch.no_grad():
            self.A_log.copy_(torch.arange(1, self.heads + 1, dtype=torch.float32, device=self.A_log.device).log())
        nn.init.ones_(self.D)
        nn.init.zeros_(self.dt_bias)

    def forward(self, x: Tensor, *, positions: Tensor | None = None, bias: Tensor | None = None,
                memory: Tensor | None = None) -> Tensor:
        """Mix `x` [b, s, h] causally through the chunked scan; return [b, s, h]."""
        batch, seq, _ = x.shape
        gate, stream, step = self.in_proj(x).split([self.inner, self.inner + 2 * self.groups * self.state,
                                                    self.heads], dim=-1)
        kernel = self.conv1d.weight.shape[-1]
        stream = F.silu(self.conv1d(F.pad(stream.transpose(1, 2), (kernel - 1, 0)))).transpose(1, 2)
        hidden, b, c = stream.split([self.inner, self.groups * self.state, self.groups * self.state], dim=-1)
        delta = F.softplus(step.float() + self.dt_bias.float())  # [b, s, H]
        heads = hidden.reshape(batch, seq, self.heads, -1)
        out = chunked_scan(heads, delta, -self.A_log.float().exp(), b.reshape(batch, seq, self.groups, -1),
                           c.reshape(batch, seq, self.groups, -1), self.chunk)
        out = out + heads.float() * self.D.float()[:, None]
        gated = out.reshape(batch, seq, self.inner) * F.silu(gate.float())
        normed = gated.reshape(batch, seq, self.groups, -1)
        normed = normed * torch.rsqrt(normed.pow(2).mean(-1, keepdim=True) + self.norm.eps)
        return self.out_proj((self.norm.weight * normed.reshape(batch, seq, self.inner).to(x.dtype)))


def chunked_scan(x: Tensor, delta: Tensor, a: Tensor, b: Tensor, c: Tensor, chunk: int) -> Tensor:
    """Return y [b, s, H, P] of h ← exp(Δ·A)·h + Δ·x·Bᵀ, y = h·C per head, chunk by chunk (SSD), in float32.

    `x` [b, s, H, P], `delta` [b, s, H], `a` [H], `b` and `c` [b, s, G, N]. Inside a
    chunk of L tokens: scores C·Bᵀ masked by the decays, times Δ·x; each chunk's
    state (Bᵀ·Δ·x) is carried to the next one token of work per chunk, elementwise.
    """
    batch, seq, heads, _ = x.shape
    pad = (-seq) % chunk
    repeat = heads // b.shape[2]
    b = b.float().repeat_interleave(repeat, dim=2)
    c = c.float().repeat_interleave(repeat, dim=2)
    xs = x.float() * delta[..., None]
    da = a[None, None] * delta  # [b, s, H]
    # [b, s, ...] -> [b, n, L, ...]; padded steps have Δ = 0: they change nothing.
    xs, da, b, c = (F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)).unflatten(1, (-1, chunk)) for t in (xs, da, b, c))
    cum = da.cumsum(2)  # [b, n, L, H]
    decay = (cum[:, :, :, None] - cum[:, :, None, :]).permute(0, 1, 4, 2, 3)  # [b, n, H, L(t), L(s)]
    mask = torch.ones(chunk, chunk, dtype=torch.bool, device=x.device).tril()
    decay = decay.masked_fill(~mask, float("-inf")).exp()
    scores = torch.einsum("bnlhd,bnshd->bnhls", c, b) * decay
    within = torch.einsum("bnhls,bnshp->bnlhp", scores, xs)
    to_end = (cum[:, :, -1:] - cum).exp()  # [b, n, L, H]
    states = torch.einsum("bnlhd,bnlhp->bnhpd", b * to_end[..., None], xs)
    state = states.new_zeros(states[:, 0].shape)
    carried = []
    for i in range(states.shape[1]):
        carried.append(state)
        state = state * cum[:, i, -1].exp()[..., None, None] + states[:, i]
    before = torch.stack(carried, dim=1)  # the state entering each chunk
    across = torch.einsum("bnlhd,bnhpd->bnlhp", c, before) * cum.exp()[..., None]
    return (within + across).flatten(1, 2)[:, :seq]


__all__ = ["Mamba", "Mamba2", "chunked_scan", "selective_scan"]
