"""Reference Gated DeltaNet for the `gated_delta_net` family: a linear-attention layer (the linrec op).

Parameter shapes follow Transformers' Qwen3-Next GatedDeltaNet: one projection
to queries, keys, values and the output gate z; one to the per-head β and
decay inputs; a depthwise causal convolution over the projected q, k, v
stream; per value head a decay rate (A_log) and a time-step bias; a gated
RMSNorm of one value head's width; the output projection. The delta rule runs
token by token (`EagerGatedDeltaNet`, the reference) or chunk by chunk
(`ChunkedGatedDeltaNet`: a WY form inside each chunk, the state carried across
chunks); both compute in float32.

Under context parallelism (cp > 1) each cp rank holds one contiguous chunk of
the sequence, in rank order (hpdsl/torch/train.py slices it so). Two things
cross the chunk boundary: the causal convolution reads the previous rank's
last conv − 1 projected inputs (every rank sends its own to the next at once,
`shift_forward`), and the delta rule starts from the previous rank's final
recurrent state (`receive_previous`, then `hand_on` passes this rank's final
state to the next): a chain from the first rank to the last in the forward and
back in the backward, the recurrence's own sequential dependency.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from hpdsl.errors import BuildError
from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.mesh import ContextLike
from hpdsl.torch.modules.collectives import hand_on, receive_previous, shift_forward
from hpdsl.torch.modules.common import RMSNorm, cp_mesh
from hpdsl.torch.modules.fused import fused, fused_pair


class GatedRMSNorm(RMSNorm):
    """RMSNorm whose output is multiplied by silu(gate); the backward keeps the input and the gate."""

    def forward(self, x: Tensor, gate: Tensor | None = None) -> Tensor:
        """Normalise `x`, scale it, and gate it with silu(`gate`)."""
        if gate is None or self.bias is not None:
            out = super().forward(x)
            return out if gate is None else out * F.silu(gate.float()).to(out.dtype)
        return fused(self.gated, x, gate, self.weight)

    def gated(self, x: Tensor, gate: Tensor, weight: Tensor) -> Tensor:
        """Return normalise(x)·silu(gate)."""
        out = self.normalise(x, weight)
        return out * F.silu(gate.float()).to(out.dtype)


class GatedDeltaNet(nn.Module):
    """Gated DeltaNet linear attention; the delta rule is chunked unless a subclass says otherwise."""

    kernel = "chunked"

    def __init__(self, config: ModuleConfig, *, layer_index: int = 0, chunk_size: int = 64,
                 context: ContextLike = None, module_fqn: str = "") -> None:
        super().__init__()
        self.cp, self.job = cp_mesh(context, module_fqn, "a Gated DeltaNet passing its state")
        n_k, d_k = config.key_heads, config.key_head_dim
        n_v, d_v = config.value_heads, config.value_head_dim
        if min(n_k, d_k, n_v, d_v, config.conv) < 1:
            raise ValueError("a Gated DeltaNet needs positive linear dims (key/value heads and dims, conv)")
        if n_v % n_k:
            raise ValueError(f"{n_v} value heads cannot share {n_k} key heads evenly")
        self.config, self.layer_index, self.chunk_size = config, layer_index, chunk_size
        key_dim, value_dim = n_k * d_k, n_v * d_v
        self.conv_dim = 2 * key_dim + value_dim
        h = config.hidden
        self.in_proj_qkvz = nn.Linear(h, 2 * key_dim + 2 * value_dim, bias=False)
        self.in_proj_ba = nn.Linear(h, 2 * n_v, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, config.conv, groups=self.conv_dim,
                                padding=config.conv - 1, bias=False)
        self.dt_bias = nn.Parameter(torch.empty(n_v))
        self.A_log = nn.Parameter(torch.empty(n_v))
        self.norm = GatedRMSNorm(d_v, config.norm_eps)
        self.out_proj = nn.Linear(value_dim, h, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise the time-step bias to ones and the decay rates uniformly in [1, 16]."""
        nn.init.ones_(self.dt_bias)
        with torch.no_grad():
            self.A_log.copy_(torch.empty_like(self.A_log).uniform_(1, 16).log())

    def forward(self, x: Tensor, *, positions: Tensor | None = None, bias: Tensor | None = None,
                memory: Tensor | None = None) -> Tensor:
        """Mix `x` [b, s, h] causally with the gated delta rule; return [b, s, h]."""
        c = self.config
        batch, seq, _ = x.shape
        key_dim, value_dim = c.key_heads * c.key_head_dim, c.value_heads * c.value_head_dim
        qkv, z = self.in_proj_qkvz(x).split([2 * key_dim + value_dim, value_dim], dim=-1)
        b, a = self.in_proj_ba(x).split(c.value_heads, dim=-1)
        # Each step keeps only its inputs for the backward, as causal-conv1d and FLA's kernels do.
        group = self.job.group("cp") if self.cp > 1 and self.job is not None else None
        if group is None:
            qkv = fused(self.short_convolution, qkv, self.conv1d.weight)
            q, k, v = qkv.split([key_dim, key_dim, value_dim], dim=-1)
            out = fused(self.gated_delta_rule, q, k, v, b, a, self.A_log, self.dt_bias)
        else:
            out = self.context_parallel_core(qkv, b, a, group)
        out = self.norm(out, z.reshape(batch, seq, c.value_heads, c.value_head_dim))
        return self.out_proj(out.reshape(batch, seq, value_dim))

    def context_parallel_core(self, qkv: Tensor, b: Tensor, a: Tensor, group: dist.ProcessGroup) -> Tensor:
        """Return the core output of this cp rank's chunk, convolving and recurring on from the previous rank's."""
        c = self.config
        batch, seq, _ = qkv.shape
        kernel = self.conv1d.weight.shape[-1]
        if seq < kernel - 1:
            raise BuildError(f"a context-parallel Gated DeltaNet needs at least conv - 1 = {kernel - 1} tokens "
                             f"per cp rank, not {seq}")
        tail = shift_forward(qkv[:, seq - (kernel - 1):], group) if kernel > 1 else qkv[:, :0]
        # The kernel keeps the received tail beside this rank's inputs (causal-conv1d's initial states), not a
        # joined copy of the chunk: docs/cost-model.md prices the tail and the received state per sequence.
        qkv = fused(self.continued_convolution, tail, qkv, self.conv1d.weight)
        key_dim = c.key_heads * c.key_head_dim
        q, k, v = qkv.split([key_dim, key_dim, c.value_heads * c.value_head_dim], dim=-1)
        like = qkv.new_zeros(batch, c.value_heads, c.key_head_dim, c.value_head_dim, dtype=torch.float32)
        initial = receive_previous(like, group)
        out, state = fused_pair(self.gated_delta_rule_from, q, k, v, b, a, self.A_log, self.dt_bias, initial)
        return hand_on(out, state, group)

    def continued_convolution(self, tail: Tensor, qkv: Tensor, weight: Tensor) -> Tensor:
        """Return silu(depthwise convolution) of `qkv` [b, s, channels] led by `tail`, the previous conv − 1 inputs."""
        mixed = F.conv1d(torch.cat([tail, qkv], dim=1).transpose(1, 2), weight, groups=weight.shape[0])
        return F.silu(mixed).transpose(1, 2)

    def short_convolution(self, qkv: Tensor, weight: Tensor) -> Tensor:
        """Return silu(causal depthwise convolution of `qkv` [b, s, channels]) as [b, s, channels]."""
        seq, kernel = qkv.shape[1], weight.shape[-1]
        mixed = F.conv1d(qkv.transpose(1, 2), weight, padding=kernel - 1, groups=weight.shape[0])
        return F.silu(mixed[..., :seq]).transpose(1, 2)

    def gated_delta_rule(self, q: Tensor, k: Tensor, v: Tensor, b: Tensor, a: Tensor, a_log: Tensor,
                         dt_bias: Tensor) -> Tensor:
        """Return the core output [b, s, n_v, d_v] from the convolved q, k, v and the gate inputs b, a."""
        return self.gated_delta_rule_from(q, k, v, b, a, a_log, dt_bias, None)[0]

    def gated_delta_rule_from(self, q: Tensor, k: Tensor, v: Tensor, b: Tensor, a: Tensor, a_log: Tensor,
                              dt_bias: Tensor, initial: Tensor | None) -> tuple[Tensor, Tensor]:
        """Return the core output and the final state [b, n_v, d_k, d_v], starting from `initial` (None: zeros)."""
        c = self.config
        batch, seq, _ = q.shape
        dtype = v.dtype
        q = q.reshape(batch, seq, c.key_heads, c.key_head_dim)
        k = k.reshape(batch, seq, c.key_heads, c.key_head_dim)
        v = v.reshape(batch, seq, c.value_heads, c.value_head_dim)
        beta = torch.sigmoid(b.float())
        g = -a_log.float().exp() * F.softplus(a.float() + dt_bias.float())
        repeat = c.value_heads // c.key_heads
        if repeat > 1:
            q, k = q.repeat_interleave(repeat, dim=2), k.repeat_interleave(repeat, dim=2)
        q, k = l2norm(q.float()), l2norm(k.float())
        out, state = self.delta_rule(q, k, v.float(), g, beta, initial)
        return out.to(dtype), state

    def delta_rule(self, q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
                   initial: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Return the gated delta rule's output [b, s, h, d_v] for q, k [b, s, h, d_k], g, beta [b, s, h], and its final state."""
        if self.kernel == "eager":
            return recurrent_delta_rule_state(q, k, v, g, beta, initial)
        return chunked_delta_rule_state(q, k, v, g, beta, self.chunk_size, initial)


class ChunkedGatedDeltaNet(GatedDeltaNet):
    """Gated DeltaNet with the chunked delta rule (the `chunked` variant)."""

    kernel = "chunked"


class EagerGatedDeltaNet(GatedDeltaNet):
    """Gated DeltaNet with the token-by-token recurrence (the `eager` variant, the reference)."""

    kernel = "eager"


def l2norm(x: Tensor, eps: float = 1e-6) -> Tensor:
    """Return x · rsqrt(Σx² + eps) over the last dim: FLA's l2norm, which transformers' matches.

    Not F.normalize's x / max(‖x‖, eps): that moved a scaled Qwen3.5's logits by 3e-3 (tests/torch/test_hf_logits.py).
    """
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def recurrent_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor) -> Tensor:
    """Return the gated delta rule computed token by token (the definition)."""
    return recurrent_delta_rule_state(q, k, v, g, beta)[0]


def recurrent_delta_rule_state(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
                               initial: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Return the recurrence's output and final state [b, h, d_k, d_v], starting from `initial` (None: zeros)."""
    batch, seq, heads, d_k = k.shape
    q = q * d_k ** -0.5
    state = q.new_zeros(batch, heads, d_k, v.shape[-1]) if initial is None else initial
    outputs = []
    for t in range(seq):
        state = state * g[:, t].exp()[..., None, None]
        remembered = (state * k[:, t, :, :, None]).sum(-2)
        delta = (v[:, t] - remembered) * beta[:, t, :, None]
        state = state + k[:, t, :, :, None] * delta[:, :, None, :]
        outputs.append((state * q[:, t, :, :, None]).sum(-2))
    return torch.stack(outputs, dim=1), state


def chunked_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, chunk: int) -> Tensor:
    """Return the gated delta rule computed chunk by chunk; equal to the recurrence up to rounding."""
    return chunked_delta_rule_state(q, k, v, g, beta, chunk)[0]


def chunked_delta_rule_state(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, chunk: int,
                             initial: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Return the chunked delta rule's output and final state, starting from `initial` (None: zeros).

    Padded steps (k = 0, g = 0) leave the state as it is, so the final state is the last real step's.
    """
    batch, seq, heads, d_k = k.shape
    pad = (-seq) % chunk
    # [b, s, h, d] -> [b, h, n, c, d]; padded steps have k = 0 and g = 0: they change nothing.
    q, k, v = (_chunks(F.pad(t.transpose(1, 2), (0, 0, 0, pad)), chunk) for t in (q * d_k ** -0.5, k, v))
    g, beta = (F.pad(t.transpose(1, 2), (0, pad)).unflatten(-1, (-1, chunk)) for t in (g, beta))
    k_beta, v_beta = k * beta[..., None], v * beta[..., None]
    g = g.cumsum(-1)
    decay = (g[..., :, None] - g[..., None, :]).tril().exp().tril()
    eye = torch.eye(chunk, dtype=q.dtype, device=q.device)
    lower = ((k_beta @ k.transpose(-1, -2)) * decay).tril(-1)
    # (I + L)^-1: the WY form of the chunk's sequence of rank-one updates.
    inverse = torch.linalg.solve_triangular(eye + lower, eye.expand_as(lower), upper=False,
                                            unitriangular=True)
    values = inverse @ v_beta
    key_decay = inverse @ (k_beta * g.exp()[..., None])
    state = q.new_zeros(batch, heads, d_k, v.shape[-1]) if initial is None else initial
    outputs = []
    for i in range(q.shape[2]):
        q_i, k_i, g_i = q[:, :, i], k[:, :, i], g[:, :, i]
        fresh = values[:, :, i] - key_decay[:, :, i] @ state
        scores = (q_i @ k_i.transpose(-1, -2)) * decay[:, :, i]
        outputs.append((q_i * g_i[..., None].exp()) @ state + scores @ fresh)
        last = g_i[..., -1:]
        state = state * last[..., None].exp() + (k_i * (last - g_i).exp()[..., None]).transpose(-1, -2) @ fresh
    out = torch.stack(outputs, dim=2).flatten(2, 3)[:, :, :seq]
    # A fused kernel writes [b, s, h, d_v]: the copy drops the padded steps, which the gated norm would keep.
    return out.transpose(1, 2).contiguous(), state


def _chunks(x: Tensor, chunk: int) -> Tensor:
    return x.unflatten(2, (-1, chunk))


__all__ = ["ChunkedGatedDeltaNet", "EagerGatedDeltaNet", "GatedDeltaNet", "GatedRMSNorm",
           "chunked_delta_rule", "chunked_delta_rule_state", "recurrent_delta_rule", "recurrent_delta_rule_state"]
