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
        seq = x.shape[1]
        hidden, gate = self.in_proj(x).chunk(2, dim=-1)
        kernel = self.conv1d.weight.shape[-1]
        hidden = F.silu(self.conv1d(F.pad(hidden.transpose(1, 2), (kernel - 1, 0))))  # [b, d, s]
        step, b, c = self.x_proj(hidden.transpose(1, 2)).split([self.rank, self.state, self.state], dim=-1)
        if self.dt_norm is not None and self.b_norm is not None and self.c_norm is not None:
            step, b, c = self.dt_norm(step), self.b_norm(b), self.c_norm(c)
        step = self.dt_proj.weight @ step.transpose(1, 2)  # [b, d, s]; the bias joins in float32 below
        out = selective_scan(hidden, step + self.dt_proj.bias.float()[:, None], self.A_log, b, c)
        out = out[:, :, :seq] + hidden * self.D[None, :, None]
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


__all__ = ["Mamba", "selective_scan"]
